"""Counts the kernels of two PTX files whose bodies are the same.

Usage: ptx_bodies.py BEFORE.ptx AFTER.ptx
Bodies are normalised as ptx_compare.py (perf/runs/2026-12-07-widesum-same-type-ptx/)
normalises them (the kernel's own name, parameter names, static shared
variables' prefixes, the anonymous namespace's hash, block labels) and matched
as a multiset, not by name: a policy template argument added with its old
value as default renames every kernel and changes no body.
"""
import collections
import os
import sys

COMPARE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                       "2026-12-07-widesum-same-type-ptx", "ptx_compare.py")
# ptx_compare.py's definitions, without its comparison by name.
defs = {}
exec(open(COMPARE).read().split("a=funcs(sys.argv[1])")[0], defs)
before = defs["funcs"](sys.argv[1])
after = defs["funcs"](sys.argv[2])
cb = collections.Counter(defs["norm"](body, name) for name, body in before.items())
ca = collections.Counter(defs["norm"](body, name) for name, body in after.items())
print(len(before), "kernels before,", len(after), "after;", sum((cb & ca).values()),
      "bodies identical;", sum((cb - ca).values()), "before-only,", sum((ca - cb).values()),
      "after-only")
