import statistics as st, sys
runs={}; cur=None
for line in open(sys.argv[1]):
    if line.startswith('##'):
        cur=line.split()[1]; runs.setdefault(cur,[]).append({}); continue
    p=line.split()
    if len(p)<8 or p[0] not in ('scan','echo','scan/echo'): continue
    runs[cur][-1][(p[0],p[1])]=(float(p[2]),float(p[5]),float(p[7]))
for v,rs in runs.items():
    r1=[r[('scan/echo','1')][1] for r in rs]; r1_99=[r[('scan/echo','1')][2] for r in rs]
    r256=[r[('scan/echo','256')][0] for r in rs]
    s1=[r[('scan','1')][1] for r in rs]; e1=[r[('echo','1')][1] for r in rs]
    s99=[r[('scan','1')][2] for r in rs]
    q=[r[('scan','256')][0] for r in rs]; qe=[r[('echo','256')][0] for r in rs]
    print(f"{v:14s} c1 p50 ratio {r1} med {st.median(r1):.3f} | c1 p50 ms scan med {st.median(s1)} echo {st.median(e1)} | c1 p99 ms scan med {st.median(s99)}, p99 ratio med {st.median(r1_99):.2f}")
    print(f"{'':14s} c256 req/s ratio {r256} med {st.median(r256):.3f} | scan {st.median(q)} echo {st.median(qe)}")
