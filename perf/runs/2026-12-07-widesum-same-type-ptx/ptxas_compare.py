"""Compares ptxas -v resources (registers, static shared memory, stack and
spills) of every kernel of a main build with the branch's, matched as
ptx_compare.py matches them; lists the branch's new kernels with theirs.
Usage: ptxas_compare.py MAIN_PTXAS_V.txt BRANCH_PTXAS_V.txt"""
import re, subprocess, sys


def parse(path):
    kernels, current = {}, None
    for line in open(path):
        m = re.search(r"Compiling entry function '(\S+)'", line)
        if m:
            current = m.group(1)
            kernels[current] = {}
            continue
        if current is None:
            continue
        m = re.search(r'Used (\d+) registers', line)
        if m:
            kernels[current]['registers'] = int(m.group(1))
        m = re.search(r'(\d+) bytes smem', line)
        if m:
            kernels[current]['smem'] = int(m.group(1))
        m = re.search(r'(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads', line)
        if m:
            kernels[current]['stack/spills'] = tuple(int(g) for g in m.groups())
    return kernels


def demangle(names):
    out = subprocess.run(['c++filt'], input='\n'.join(names), capture_output=True, text=True).stdout
    return dict(zip(names, out.split('\n')))


main, branch = parse(sys.argv[1]), parse(sys.argv[2])
dm, db = demangle(list(main)), demangle(list(branch))
by_name = {v: k for k, v in db.items()}
matched, same = set(), 0
for name, pretty in dm.items():
    twin = by_name.get(pretty)
    if twin is None:
        m = re.match(r'(void primserve::gpu::(?:detail::|\(anonymous namespace\)::)?\w+<)([^,<>]+)(.*)>\((.*)\)$', pretty)
        want = m.group(1) + m.group(2) + m.group(3) + ', ' + m.group(2) + '>('
        twin = next(k for k, v in db.items() if v.startswith(want))
    matched.add(twin)
    if main[name] == branch[twin]:
        same += 1
    else:
        print('differs:', pretty[:120], main[name], branch[twin])
print(f'{len(main)} kernels on main, {same} with the same resources in the branch')
for name in branch:
    if name not in matched:
        pretty = db[name].split('>(')[0] + '>'
        kernel = re.search(r'(\w+Kernel)<', pretty).group(1)
        types = re.findall(r'(?:<|, )((?:unsigned )?(?:int|long|float|double))(?=[,>])', pretty)
        op = re.search(r'\(primserve::Op\)(\d)', pretty)
        segmented = ' segmented' if re.search(r'Op\)\d, true', pretty) else ''
        print(f'new: {kernel} {types[0]} into {types[-1]} op {op.group(1) if op else "-"}{segmented}',
              branch[name])
