"""Compares the PTX of every kernel of a main build with the branch's.

Usage: ptx_compare.py MAIN.ptx BRANCH.ptx [--ignore-kept]
Kernels are matched by demangled name (the branch's ScanKernel/ReduceKernel
carry one more template argument, the accumulator, equal to the input type
for the existing instantiations); bodies are compared after normalising what
differs between any two compilations (the kernel's own mangled name, its
parameter names, static shared variables' mangled prefixes, the anonymous
namespace's per-file hash, basic-block label numbers). --ignore-kept also
drops the in-order look-back's static `kept` array declaration, which the
branch defines once at module scope where several kernels share its function.
"""
import re, subprocess, sys
def funcs(p):
    lines=open(p).read().split('\n')
    d={}; i=0
    while i<len(lines):
        m=re.match(r'(?:\.visible |\.weak )?\.entry (\S+)\(', lines[i])
        if m:
            name=m.group(1); body=[]
            while lines[i].strip()!='}':
                body.append(lines[i]); i+=1
            d[name]='\n'.join(body)
        i+=1
    return d
def tok(m):
    t=m.group(0)
    mm=re.search(r'^.*E\d+([a-z_]+)$', t)
    return 'L_'+(mm.group(1) if mm else 'x')
def norm(body,name):
    body=body.replace(name,'NAME')
    body=re.sub(r'NAME_param_(\d+)',r'P\1',body)
    body=re.sub(r'_GLOBAL__N__[0-9a-f]{8}_\d+_\w+?_cu_[0-9a-f]{8}','ANON',body)
    body=re.sub(r'_ZZ\w+',tok,body)
    body=re.sub(r'\$L__BB\d+_',r'$L__BB_',body)
    if '--ignore-kept' in sys.argv: body='\n'.join(l for l in body.split('\n') if 'L_kept' not in l and 'demoted variable' not in l)
    return body
a=funcs(sys.argv[1]); b=funcs(sys.argv[2])
def dem(names):
    out=subprocess.run(['c++filt'],input='\n'.join(names),capture_output=True,text=True).stdout.split('\n')
    return dict(zip(names,out))
da=dem(list(a)); db=dem(list(b))
inv_b={v:k for k,v in db.items()}
same=0; diffs=[]
for n,d in da.items():
    cand=inv_b.get(d)
    if cand is None:
        m=re.match(r'(void primserve::gpu::(?:detail::|\(anonymous namespace\)::)?\w+<)([^,<>]+)(.*)>\((.*)\)$', d)
        if m:
            want=m.group(1)+m.group(2)+m.group(3)+', '+m.group(2)+'>('
            for nb,dbn in db.items():
                if dbn.startswith(want): cand=nb;break
    if cand is None: diffs.append(('nomatch',d)); continue
    if norm(a[n],n)==norm(b[cand],cand): same+=1
    else: diffs.append(('diff',d))
print(len(a),"kernels in main;",same,"with identical PTX in the branch;",len(b)-len(a),"new kernels")
for k,d in diffs[:30]: print(k,d[:160])
