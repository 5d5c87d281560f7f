import json, subprocess, sys, collections
def prof(perf, ios):
    out = subprocess.run(['perf','report','-i',perf,'--stdio','--sort','sym','-F','sample,sym','--no-children'],capture_output=True,text=True).stdout
    d = collections.Counter()
    for line in out.splitlines():
        line=line.strip()
        if not line or line.startswith('#'): continue
        parts=line.split(None,2)
        if len(parts)<3: continue
        d[parts[1]+' '+parts[2]]+=int(parts[0])
    cyc=2.6e9/4000
    return {k:v*cyc/ios for k,v in d.items()}
raw=json.load(open('/tmp/p16/raw.json'))
R=prof('/tmp/p16/raw.perf', raw['iops']*5)
print('raw cyc/io', raw['cycles_per_io'])
tags=sys.argv[1].split(',')
C=collections.Counter()
for t in tags:
    r=json.load(open(f'/tmp/p16/{t}.json'))['run']
    for k,v in prof(f'/tmp/p16/{t}.perf', r['ops_per_s']*5*r['reads_per_op']).items(): C[k]+=v/len(tags)
kr=sum(v for k,v in R.items() if k.startswith('[k]')); kc=sum(v for k,v in C.items() if k.startswith('[k]'))
print(f'kernel per read: raw {kr:.0f}  run {kc:.0f}; user raw {sum(R.values())-kr:.0f} run {sum(C.values())-kc:.0f}')
rows=sorted([k for k in set(R)|set(C) if k.startswith('[k]')],key=lambda k:-(C.get(k,0)-R.get(k,0)))
for k in rows[:30]: print(f'{C.get(k,0)-R.get(k,0):8.0f} {R.get(k,0):8.0f} {C.get(k,0):8.0f}  {k}')
print('...')
for k in rows[-8:]: print(f'{C.get(k,0)-R.get(k,0):8.0f} {R.get(k,0):8.0f} {C.get(k,0):8.0f}  {k}')
