#!/usr/bin/env bash
# Quick start, step 2: install what is missing, build, and run the whole test suite
# (C++ unit and integration tests against the real server, and the Python tests) in
# parallel, then each libFuzzer target for a short bounded time (deploy/fuzz.sh,
# GPUEST_FUZZ_SECONDS each, 20 by default; 0 skips). Training and long benchmarks
# (bench/soak.sh) are not part of it.
#
# Tests that compare against the measured datasets (README.md, "The measured data") find
# them through GPUEST_DATA_DIR (default ../shared/data); without them they are skipped and
# the run ends by saying which and why. GPUEST_REQUIRE_DATA=1 makes such a skip a failure
# (.ci/run sets it: CI has the data).
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/build.sh
status=0
ctest --test-dir build -j "$(nproc)" --output-on-failure --timeout 600 || status=$?
bash deploy/report-skips.sh build
if [[ "$status" -ne 0 ]]; then
  exit "$status"
fi
if [ "${GPUEST_FUZZ_SECONDS:-20}" != 0 ]; then
  bash deploy/fuzz.sh "${GPUEST_FUZZ_SECONDS:-20}"
fi
