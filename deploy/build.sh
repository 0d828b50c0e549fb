#!/usr/bin/env bash
# Installs what is missing, then configures and builds gpuest into build/ (incremental).
# Usage: deploy/build.sh   (as root, or with sudo available for the installer)
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install-deps.sh
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
# Two jobs: libtorch and gRPC translation units take over 1 GB of memory each.
ninja -C build -j "${GPUEST_BUILD_JOBS:-$(nproc)}"
