#!/usr/bin/env bash
# Quick start, step 1: install what is missing, build, and serve the bundled models on
# loopback: gRPC on 127.0.0.1:50051, Prometheus /metrics on 127.0.0.1:9464.
# Extra arguments go to gpuest-server (see `build/server/gpuest-server --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/build.sh
exec build/server/gpuest-server --models models --listen 127.0.0.1:50051 \
  --metrics-listen 127.0.0.1:9464 "$@"
