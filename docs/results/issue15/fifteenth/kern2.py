import json, subprocess, sys, collections
GHZ=2.45
def prof(perf, denom):
    out = subprocess.run(['perf','report','-i',perf,'--stdio','--sort','dso,sym','-F','sample,dso,sym','--no-children','-g','none'],capture_output=True,text=True).stdout
    d = collections.Counter()
    for line in out.splitlines():
        line=line.strip()
        if not line or line.startswith('#'): continue
        parts=line.split(None,3)
        if len(parts)<4: continue
        d[parts[2]+' '+parts[3]]+=int(parts[0])
    cyc=GHZ*1e9/4000  # perf cpu-clock default 4000 Hz
    return {k:v*cyc/denom for k,v in d.items()}
tags=sys.argv[1].split(',')
R=collections.Counter(); C=collections.Counter(); rawcyc=[]
for t in tags:
    raw=json.load(open(f'/tmp/p17/raw-{t}.json')); rawcyc.append(raw['cycles_per_io'])
    for k,v in prof(f'/tmp/p17/raw-{t}.perf', raw['iops']*5).items(): R[k]+=v/len(tags)
    r=json.load(open(f'/tmp/p17/{t}.json'))['run']
    for k,v in prof(f'/tmp/p17/{t}.perf', r['ops_per_s']*5*r['reads_per_op']).items(): C[k]+=v/len(tags)
print('raw cyc/io', [round(x) for x in rawcyc])
kr=sum(v for k,v in R.items() if k.startswith('[k]')); kc=sum(v for k,v in C.items() if k.startswith('[k]'))
print(f'per page read: kernel raw {kr:.0f} run {kc:.0f}; user raw {sum(R.values())-kr:.0f} run {sum(C.values())-kc:.0f}')
rows=sorted([k for k in set(R)|set(C) if k.startswith('[k]')],key=lambda k:-(C.get(k,0)-R.get(k,0)))
for k in rows[:25]: print(f'{C.get(k,0)-R.get(k,0):8.0f} {R.get(k,0):8.0f} {C.get(k,0):8.0f}  {k}')
print('...')
for k in rows[-8:]: print(f'{C.get(k,0)-R.get(k,0):8.0f} {R.get(k,0):8.0f} {C.get(k,0):8.0f}  {k}')
