# Medians of the A/B logs of this round: python3 medians.py LOG variant1,variant2,...
# (per variant, row: median ours us and median ours/CUB over the rounds).
import sys,re,collections,statistics
def parse(path):
    d=collections.defaultdict(list)  # (variant,prim,dtype,n)->[(ours,cub)]
    var=None
    for line in open(path):
        m=re.match(r'=== (\w+?)_(compaction|scan)_(\d)',line)
        if m: var=m.group(1); continue
        if line.startswith('|') and 'ours us' not in line and '---' not in line:
            c=[x.strip() for x in line.strip().strip('|').split('|')]
            if len(c)<7: continue
            try: d[(var,c[0],c[1],c[2])].append((float(c[4]),float(c[5])))
            except: pass
    return d
d=parse(sys.argv[1]); vars_=sys.argv[2].split(',')
keys=sorted({k[1:] for k in d}, key=lambda k:(k[0],k[1],int(k[2][2:])))
print(f"{'prim':22}{'dtype':8}{'n':6}"+''.join(f"{v+' us':>10}{v+'/cub':>9}" for v in vars_))
for k in keys:
    s=f"{k[0]:22}{k[1]:8}{k[2]:6}"
    for v in vars_:
        r=d.get((v,)+k)
        if not r: s+=' '*19; continue
        o=statistics.median(x[0] for x in r); rr=statistics.median(x[1]/x[0] for x in r)
        s+=f"{o:10.1f}{rr:9.3f}"
    print(s)
