#!/usr/bin/env bash
# Quick start, step 2: install what is missing, build, and run the whole test suite
# (C++ unit and integration tests against the real server, and the Python tests) in
# parallel. Training and long benchmarks are not part of it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/build.sh
ctest --test-dir build -j "$(nproc)" --output-on-failure --timeout 600
