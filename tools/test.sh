#!/usr/bin/env bash
# Installs what the build needs (Debian packages), checks that the paths the
# docs name exist, then builds everything and runs every test that needs no
# GPU; then the CPU-side tests again under the sanitizers, and a minute of
# fuzzing. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/setup.sh
# server/ includes only downward (engine < shm < backends < rpc < assembly).
./tools/check_layers.py
# Every repository path README.md, docs/*.md and perf/*.md name exists.
/usr/bin/python3 tools/check_doc_paths_test.py
/usr/bin/python3 tools/check_doc_paths.py
bazel test //... "$@"
# The Python client (client/python) against the primserve just built, on
# Debian's python3, which has the packages setup.sh installs.
/usr/bin/python3 -m pytest -q -p no:cacheprovider client/python/tests --primserve="$(bazel info bazel-bin)/server/primserve"
# The container image: built with podman from what was just built, its
# entrypoint started from the exported root filesystem and called.
./deploy/image_test.sh
# Memory errors, leaks and undefined behaviour, in the in-process tests (the
# tests of the primserve binary would rebuild the CUDA kernels for this config).
bazel test --config=asan-ubsan --build_tests_only //reference:reference_test //reference:sort_test //server:all //server/engine:all //server/rpc:all //server/cpu:all //server/cuda:staging_test //server/cuda:device_picker_test //server/cuda:footprint_test \
  //tests:service_test //tests:sort_service_test //tests:malformed_test //tests:overload_test //tests:health_test \
  //tests:reflection_test //tests:hostile_test //tests:completion_queue_test //tests:multiplex_test //tests:stream_test //tests:amplification_test \
  //server/shm:all //tests:shared_memory_test //tests:stock_stub_test //server/buffers:all //tests:buffers_test //tests:pipeline_test \
  //tests/fuzz:corpus_test //client:shared_memory_region_test //client:cli_flags_test //client:buffers_client_test //client:multiplex_session_test \
  //client:loadgen_stats_test //wire:wire_test //wire:parallel_copy_test
# Data races, in the tests whose threads meet only in primserve's own code
# (see .bazelrc on why not the gRPC ones).
bazel test --config=tsan //server/cuda:device_picker_test //server/engine:batcher_test //server/engine:metrics_test //server/engine:memory_budget_test \
  //server/engine:admission_test //wire:parallel_copy_test //server/cpu:cpu_sort_test //server/cpu:cpu_select_test
./tools/fuzz.sh
