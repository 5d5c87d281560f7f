import sys
samples=[]; cur=[]
for line in sys.stdin:
    s=line.strip()
    if not s:
        if cur: samples.append(cur); cur=[]
        continue
    cur.append(s)
if cur: samples.append(cur)
irq=('common_interrupt','handle_softirqs','__do_softirq','do_softirq','irq_exit_rcu','sysvec_','asm_common_interrupt','vring_interrupt','__sysvec')
n=len(samples); k=0; kern=0
from collections import Counter
top=Counter()
for smp in samples:
    frames=[f.split()[-1] if len(f.split())>1 else f for f in smp[1:]]
    if any(any(f.startswith(p) or p in f for p in irq) for f in frames):
        k+=1
        # the innermost frame
        top[frames[0] if frames else '?']+=1
print(f"samples {n}  in interrupt/softirq context {k} ({100*k/max(n,1):.1f}%)")
for s,c in top.most_common(8): print(f"   {c:6d} {s}")
