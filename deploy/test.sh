#!/usr/bin/env bash
# Quick start, step 2: install what is missing, build, and run the whole test suite
# (C++ unit and integration tests against the real server, and the Python tests) in
# parallel, then each libFuzzer target for a short bounded time (deploy/fuzz.sh,
# GPUEST_FUZZ_SECONDS each, 20 by default; 0 skips). Training and long benchmarks
# (bench/soak.sh) are not part of it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/build.sh
ctest --test-dir build -j "$(nproc)" --output-on-failure --timeout 600
if [ "${GPUEST_FUZZ_SECONDS:-20}" != 0 ]; then
  bash deploy/fuzz.sh "${GPUEST_FUZZ_SECONDS:-20}"
fi
