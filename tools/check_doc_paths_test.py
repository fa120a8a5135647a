#!/usr/bin/python3
"""Tests of check_doc_paths.py on a small git repository made for each test."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_doc_paths  # noqa: E402


class CheckDocPathsTest(unittest.TestCase):
    def setUp(self):
        self.repo = tempfile.mkdtemp(prefix="check_doc_paths_")
        subprocess.run(["git", "init", "-q", self.repo], check=True)
        tracked = ["server/main.cc", "tools/test.sh", "perf/runs/a/log.txt", "kernels/bench/x.cu"]
        for path in tracked:
            self.write(path, "")
        subprocess.run(["git", "-C", self.repo, "add"] + tracked, check=True)

    def tearDown(self):
        shutil.rmtree(self.repo)

    def write(self, path, text):
        full = os.path.join(self.repo, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)

    def missing(self, readme, perf_page=""):
        self.write("README.md", readme)
        self.write("perf/README.md", perf_page)
        subprocess.run(["git", "-C", self.repo, "add", "README.md", "perf/README.md"], check=True)
        return check_doc_paths.missing_paths(self.repo)[1]

    def test_existing_paths_pass(self):
        self.assertEqual(self.missing(
            "Run `./tools/test.sh`, see `server/main.cc:12`, `perf/runs/a/`, `kernels/bench/*.cu`,\n"
            "`//server:main`, `/dev/shm/x`, `perf/runs/<date>/`, `$OUT/x`, plain server/gone.cc.\n"
            "```sh\ntools/test.sh --flag && server/main.cc\n```\n",
            "[runs](runs/a/log.txt) and [home](../README.md#top) and [web](https://x.org/a/b)\n"), [])

    def test_missing_paths_are_listed_with_page_and_line(self):
        self.assertEqual(self.missing(
            "ok `server/main.cc`\nnot `server/results/old.md` nor `kernels/bench/*.cc`\n"
            "```\ntools/gone.sh OUT\n```\n",
            "[gone](runs/b/)\n"), [
                "README.md:2: server/results/old.md",
                "README.md:2: kernels/bench/*.cc",
                "README.md:4: tools/gone.sh",
                "perf/README.md:1: runs/b/",
            ])

    def test_untracked_files_do_not_count(self):
        self.write("server/untracked.cc", "")
        self.assertEqual(self.missing("`server/untracked.cc`\n"),
                         ["README.md:1: server/untracked.cc"])


if __name__ == "__main__":
    unittest.main()
