#!/usr/bin/env python3
"""Fails if a file under server/ includes a header of a layer above its own.

The layers, lowest first: engine/ (tasks, admission, batching, the backend
interface, budgets, metrics); shm/ (registered shared memory); the backends
cpu/ and cuda/; rpc/ (the gRPC services); and server.{h,cc} and main.cc,
which assemble them. Tests may reach across layers to build what they test.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
# What each folder's code may include from server/.
ALLOWED = {
    "engine": {"engine"},
    "shm": {"engine", "shm"},
    "cpu": {"engine", "cpu"},
    "cuda": {"engine", "cuda"},
    "rpc": {"engine", "shm", "rpc"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"server/([^"]+)"', re.M)


def layer_of(path: str) -> str:
    parts = path.split("/")
    return parts[0] if len(parts) > 1 else "assembly"


def main() -> int:
    problems = []
    for source in sorted((ROOT / "server").rglob("*")):
        if source.suffix not in {".h", ".cc", ".cu", ".cuh"} or source.stem.endswith("_test"):
            continue
        own = layer_of(str(source.relative_to(ROOT / "server")))
        if own not in ALLOWED:
            continue
        for included in INCLUDE.findall(source.read_text()):
            target = layer_of(included)
            if target not in ALLOWED[own]:
                problems.append(f"{source.relative_to(ROOT)} includes server/{included} "
                                f"({target} is not below {own})")
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
