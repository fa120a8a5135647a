#!/usr/bin/env bash
# Builds the request-path fuzzer (clang, libFuzzer, ASan, UBSan; see
# tests/fuzz/) and runs it for FUZZ_SECONDS (default 60) from the checked-in
# seed corpus. New inputs go to a scratch directory, so the checked-in corpus
# is left as it is. Exits non-zero on a crash, a sanitizer report, a leak, a
# slow input or an allocation over the limits below; the input that did it is
# saved under FUZZ_ARTIFACTS (default /tmp/primserve-fuzz/).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-60}"
artifacts="${FUZZ_ARTIFACTS:-/tmp/primserve-fuzz/}"

bazel build --config=fuzz //tests/fuzz:request_fuzzer
fuzzer="$(bazel info --config=fuzz bazel-bin)/tests/fuzz/request_fuzzer"

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$artifacts" "$scratch/corpus"
status=0
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=256 \
  -print_final_stats=1 -artifact_prefix="$artifacts" \
  "$scratch/corpus" tests/fuzz/corpus >"$scratch/log" 2>&1 || status=$?
if ((status != 0)); then
  tail -n 60 "$scratch/log" >&2
  echo "fuzz: FAILED (exit $status); input saved under $artifacts" >&2
  exit 1
fi
# libFuzzer's last lines: "Done <runs> runs in <seconds> second(s)" and stats.
runs_line="$(grep -E '^Done [0-9]+ runs in [0-9]+ second' "$scratch/log")"
echo "fuzz: ${runs_line#Done }, $(ls "$scratch/corpus" | wc -l) new inputs, no findings"
