import json, subprocess, sys, collections
def load(tag):
    r = json.load(open(f'/tmp/p16/{tag}.json'))['run']
    out = subprocess.run(['perf','report','-i',f'/tmp/p16/{tag}.perf','--stdio','--sort','sym','-F','sample,sym','--no-children'],capture_output=True,text=True).stdout
    d = collections.Counter(); total=0
    for line in out.splitlines():
        line=line.strip()
        if not line or line.startswith('#'): continue
        parts=line.split(None,2)
        if len(parts)<3: continue
        n=int(parts[0]); sym=parts[2]; d[sym]+=n; total+=n
    ops = r['ops_per_s']*5.0
    cyc = 2.6e9/4000  # cycles per sample (approx)
    return {k: v*cyc/ops for k,v in d.items()}, total*cyc/ops, r
a_tags, b_tags = sys.argv[1].split(','), sys.argv[2].split(',')
def avg(tags):
    acc=collections.Counter(); tot=0
    for t in tags:
        d,tt,_=load(t); tot+=tt/len(tags)
        for k,v in d.items(): acc[k]+=v/len(tags)
    return acc,tot
A,ta=avg(a_tags); B,tb=avg(b_tags)
print(f'total cyc/op (perf est): A {ta:.0f}  B {tb:.0f}')
ka=sum(v for k,v in A.items() if k.startswith('[k]')); kb=sum(v for k,v in B.items() if k.startswith('[k]'))
print(f'kernel: A {ka:.0f} B {kb:.0f}; user: A {ta-ka:.0f} B {tb-kb:.0f}')
keys=set(A)|set(B)
rows=sorted(keys,key=lambda k:-(B.get(k,0)-A.get(k,0)))
for k in rows[:25]: print(f'{B.get(k,0)-A.get(k,0):8.0f} {A.get(k,0):8.0f} {B.get(k,0):8.0f}  {k}')
print('...')
for k in rows[-10:]: print(f'{B.get(k,0)-A.get(k,0):8.0f} {A.get(k,0):8.0f} {B.get(k,0):8.0f}  {k}')
