#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang in build-fuzz/ (the main build
# uses gcc) and runs each for a bounded time from its seed corpus in
# tests/fuzz/corpus/<target>/. New inputs go to build-fuzz/corpus/<target>/, never into
# the repository; a crash leaves its input in build-fuzz/artifacts/ and fails the run:
# copy it into tests/fuzz/regressions/<target>/ before fixing it (the normal build's
# fuzz_corpus_test runs every file there through the target's properties).
#
# Usage: deploy/fuzz.sh [SECONDS_PER_TARGET]   (default $GPUEST_FUZZ_SECONDS, else 20)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-${GPUEST_FUZZ_SECONDS:-20}}
targets=(description_json summary_parser request_validation extender_args node_gpus
  admission_review)

if [ ! -f build-fuzz/build.ninja ]; then
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=clang++-14 -DGPUEST_FUZZ=ON \
    -DGPUEST_BUILD_TESTS=OFF -DGPUEST_BUILD_BENCH=OFF >/dev/null
fi
ninja -C build-fuzz -j "${GPUEST_BUILD_JOBS:-$(nproc)}" "${targets[@]/%/_fuzzer}"

mkdir -p build-fuzz/artifacts
failed=0
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t"
  echo "[fuzz] $t for ${seconds}s"
  # Inputs long enough to nest past the depth limit and to reach the size bounds
  # (the annotation's 256 KiB), not libFuzzer's default 4 KiB.
  if ! "build-fuzz/tests/fuzz/${t}_fuzzer" -max_total_time="$seconds" -timeout=10 \
    -max_len=$((256 * 1024 + 1024)) \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/${t}-" \
    "build-fuzz/corpus/$t" "tests/fuzz/corpus/$t" >"build-fuzz/$t.log" 2>&1; then
    echo "[fuzz] $t FAILED; its input is in build-fuzz/artifacts/ (log: build-fuzz/$t.log)" >&2
    tail -40 "build-fuzz/$t.log" >&2
    failed=1
  fi
  grep -E '^stat::number_of_executed_units|^#[0-9]+.*DONE' "build-fuzz/$t.log" || true
done
exit "$failed"
