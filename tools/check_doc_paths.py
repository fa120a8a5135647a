#!/usr/bin/python3
"""Checks that every repository path the docs name exists.

Scans README.md, docs/*.md and perf/*.md for paths in backticks (inline or
fenced code) and in Markdown links. A backticked word counts as a path when it
has a `/` and starts with a top-level folder of the repository (`server/`,
`tools/`, ...); a link counts when it is not a URL or an anchor, and is read
relative to the page, as Markdown readers do. A path exists when git tracks a
file at it or under it (globs such as `kernels/bench/*.cu` must match one), so
the check holds for a fresh clone, not for this checkout's build outputs.
Prints each missing path with its page and line; exits 1 if any is missing.

  tools/check_doc_paths.py [PAGE.md ...]   (default: the pages above)
"""
import fnmatch
import glob
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INLINE_CODE = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
# Placeholders and shell syntax are not paths: perf/runs/<date>-..., $OUT/x.
NOT_A_PATH = re.compile(r"[<>$*{}]|^[a-z]+://")
PUNCTUATION = ",;:()[]'\""


def tracked_files(repo):
    out = subprocess.run(["git", "-C", repo, "ls-files", "-z"], check=True,
                         capture_output=True, text=True).stdout
    return [f for f in out.split("\0") if f]


def exists(path, files, folders):
    path = os.path.normpath(path)
    if any(c in path for c in "*?["):
        return any(fnmatch.fnmatchcase(f, path) for f in files)
    return path in files or path in folders


def candidates(line, in_fence):
    """(path, relative_to_page) for each path-like word of one line."""
    spans = [line] if in_fence else INLINE_CODE.findall(line)
    for span in spans:
        for word in span.split():
            yield word, False
    if not in_fence:
        for target in LINK.findall(line):
            if not re.match(r"^([a-z]+:|#|mailto:)", target):
                yield target.split("#")[0], True


def check(repo, page, files, folders, top):
    missing = []
    in_fence = False
    for number, line in enumerate(open(os.path.join(repo, page), encoding="utf-8"), 1):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        for word, relative in candidates(line, in_fence):
            word = word.strip(PUNCTUATION)
            if word.startswith("./"):
                word = word[2:]
            word = word.rstrip(".")
            word = re.sub(r":\d+(-\d+)?$", "", word)  # file.cc:176
            if relative:
                if not word:
                    continue
                path = os.path.relpath(os.path.join(repo, os.path.dirname(page), word), repo)
            else:
                if "/" not in word or NOT_A_PATH.search(word.replace("*", "")):
                    continue
                if word.split("/")[0] not in top:
                    continue
                path = word
            if path.startswith("..") or not exists(path, files, folders):
                missing.append(f"{page}:{number}: {word}")
    return missing


def missing_paths(repo, pages=None):
    """'page:line: path' for each path the pages name that git does not track."""
    files = set(tracked_files(repo))
    folders = {os.path.dirname(f) for f in files}
    for folder in list(folders):
        while folder:
            folder = os.path.dirname(folder)
            folders.add(folder)
    top = {f.split("/")[0] for f in files if "/" in f}
    if not pages:
        pages = ["README.md"] + sorted(
            os.path.relpath(p, repo) for pattern in ("docs/*.md", "perf/*.md")
            for p in glob.glob(os.path.join(repo, pattern)))
    return pages, [m for page in pages for m in check(repo, page, files, folders, top)]


# A step of a table that follows code: | step | `path` | `Function` | ... |
STEP = re.compile(r"^\|[^|]*\|\s*`([^`]+)`\s*\|\s*`([A-Za-z_][\w:<>, ]*)`\s*\|")


def missing_functions(repo, page):
    """'page:line: path: name' for each table row naming a function its file lacks."""
    missing = []
    with open(os.path.join(repo, page), encoding="utf-8") as text:
        for number, line in enumerate(text, 1):
            step = STEP.match(line)
            if not step or not os.path.isfile(os.path.join(repo, step.group(1))):
                continue
            name = re.sub(r"<.*", "", step.group(2)).split("::")[-1]
            with open(os.path.join(repo, step.group(1)), encoding="utf-8") as source:
                if not re.search(r"\b%s\b" % re.escape(name), source.read()):
                    missing.append(f"{page}:{number}: {step.group(1)}: {step.group(2)}")
    return missing


def main():
    pages, missing = missing_paths(REPO, sys.argv[1:])
    if not sys.argv[1:]:
        missing += missing_functions(REPO, "docs/ARCHITECTURE.md")
    for m in missing:
        print(f"missing: {m}")
    print(f"check_doc_paths: {len(pages)} pages, {len(missing)} missing paths")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
