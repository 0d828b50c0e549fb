#!/usr/bin/env bash
# One lease (at most 5 minutes) that proves the served GPUMemNet / GPUUtilNet ensembles on
# a GPU (issue 50), in one command from the repository root:
#   bash lab/gpu/device_run_ml.sh
#  1. the toolchain it finds: compiler, CMake, ninja, nvcc, torch and its CUDA, the GPU;
#  2. gpuest-ml-check built against the machine's torch (lab/gpu/ml_check: a compiler,
#     CMake and libtorch alone; a plain c++ line if CMake cannot configure torch) and run:
#     every served ensemble on the CPU and on the GPU, the same rows, the largest
#     probability difference (<= 1e-5), served bins and classes that differ (none), time
#     per request at batch 1 and 64 on each, the GPU memory the ensembles hold;
#  3. the full server with --device cuda, where its dependencies are on the machine: one
#     Estimate, `gpuest models` and /metrics naming the device; where they are not, the
#     exact list of what is missing.
# Rows: .devcarry/ml_rows.txt when carried (GPUMemNet's measured rows and the served CPU
# path's probabilities, from `gpuest-ml-rows --data-dir ../shared/data/gpumemnet --out
# .devcarry/ml_rows.txt` on a machine with the full build; name .devcarry in the device
# tool's carry), else rows the check generates from each manifest.
# GPUEST_ML_SERVER=0 leaves step 3 out; GPUEST_ML_BUILD=cxx builds the check with the
# plain c++ line only. Output under $OUT (the device tool) or
# ./device-out; commit it under data/ with a README (lab/gpu/ml_check/README.md says how).
source lab/gpu/device_setup.sh
OUT="$(cd "$OUT" && pwd)"
LIMIT_S="${LIMIT_S:-290}"  # The whole script, steps cut to fit; the tool's timeout_s: 330.
START=$SECONDS
left() { echo $((LIMIT_S - (SECONDS - START))); }
# Seconds for a step that leaves $1 s to those after it; 10 at least (timeout 0 is none).
budget() { local t=$(($(left) - $1)); [ "$t" -lt 10 ] && t=10; echo "$t"; }
PY="${PYTHON:-python3}"
JOBS="$(nproc)"
# TorchConfig of a CUDA wheel looks for CUDA's toolkit; nvcc may be off the PATH.
[ -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null && export PATH="$PATH:/usr/local/cuda/bin"
CUDA_ARGS=(); command -v nvcc >/dev/null && CUDA_ARGS=(-DCMAKE_CUDA_COMPILER="$(command -v nvcc)")

# 1. The toolchain.
{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "uname: $(uname -srm)"
  echo "cpus: $JOBS"
  echo "compiler: $(c++ --version 2>&1 | head -1)"
  echo "cmake: $(cmake --version 2>&1 | head -1)"
  echo "ninja: $(ninja --version 2>&1 || echo missing)"
  echo "nvcc: $(nvcc --version 2>&1 | tail -1 || echo missing)"
  { nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv,noheader \
    2>/dev/null || echo "no nvidia-smi"; } | sed 's/^/gpu: /'
  echo "kernel driver: $(head -1 /proc/driver/nvidia/version 2>/dev/null || echo none)"
  "$PY" - <<'EOF' 2>&1
import torch
print("python torch:", torch.__version__, "cuda", torch.version.cuda,
      "cudnn", torch.backends.cudnn.version(), "available", torch.cuda.is_available())
print("torch cxx11 abi:", int(torch._C._GLIBCXX_USE_CXX11_ABI))
print("torch cmake prefix:", torch.utils.cmake_prefix_path)
EOF
} | tee "$OUT/env.txt"
TORCH_PREFIX="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null)"
TORCH_ROOT="${GPUEST_TORCH_ROOT:-$("$PY" -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null)}"
ABI="$("$PY" -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))' 2>/dev/null)"
if [ -z "$TORCH_PREFIX" ]; then
  echo "MISSING: python3 cannot import torch: nothing to build against" | tee -a "$OUT/env.txt"
  exit 1
fi

# 2. The check, built against this torch.
CHECK=/tmp/gpuest-ml-check/gpuest-ml-check
rm -f "$CHECK"; mkdir -p "$(dirname "$CHECK")"
[ "${GPUEST_ML_BUILD:-cmake}" = cmake ] && {
  echo "== cmake -S lab/gpu/ml_check against $TORCH_PREFIX"
  GEN=(); command -v ninja >/dev/null && GEN=(-G Ninja)
  timeout 90 cmake -S lab/gpu/ml_check -B /tmp/gpuest-ml-check "${GEN[@]}" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" "${CUDA_ARGS[@]}" &&
    timeout "$(budget 150)" cmake --build /tmp/gpuest-ml-check -j "$JOBS"
} >"$OUT/build.log" 2>&1
if [ ! -x "$CHECK" ] && [ "$(left)" -gt 140 ]; then
  # TorchConfig could not configure (a CUDA toolkit it wants, say): the compiler line
  # torch.utils.cpp_extension would use. --no-as-needed keeps libtorch_cuda, whose
  # loading is what registers CUDA with libtorch.
  echo "== no check from CMake (above, or GPUEST_ML_BUILD=cxx); a plain c++ line, ABI $ABI" >>"$OUT/build.log"
  DEFS=(-D_GLIBCXX_USE_CXX11_ABI="$ABI")
  if grep -qs 'DeviceAllocator\* getDeviceAllocator(' "$TORCH_ROOT/include/c10/core/CachingDeviceAllocator.h"; then
    DEFS+=(-DGPUEST_ML_CHECK_ALLOCATOR_STATS)
  fi
  CUDA_LIBS=(); [ -e "$TORCH_ROOT/lib/libtorch_cuda.so" ] && CUDA_LIBS=(-ltorch_cuda -lc10_cuda)
  # Each file compiled apart, at once; then linked.
  cxx_build() {
    local std=$1 f pids=() ok=1
    for f in lab/gpu/ml_check/ml_check_main.cc lab/gpu/ml_check/mini_json.cc \
      lab/gpu/ml_check/ml_rows.cc estimators/gpumemnet/network_module.cc; do
      timeout "$(budget 120)" c++ -O2 -std="$std" "${DEFS[@]}" -I. -isystem "$TORCH_ROOT/include" \
        -isystem "$TORCH_ROOT/include/torch/csrc/api/include" -c "$f" \
        -o "/tmp/gpuest-ml-check/$(basename "$f").o" &
      pids+=($!)
    done
    for f in "${pids[@]}"; do wait "$f" || ok=0; done
    [ "$ok" = 1 ] && c++ /tmp/gpuest-ml-check/*.cc.o -o "$CHECK" -L"$TORCH_ROOT/lib" \
      -Wl,--no-as-needed -ltorch -ltorch_cpu "${CUDA_LIBS[@]}" -lc10 -Wl,--as-needed \
      -Wl,-rpath,"$TORCH_ROOT/lib"
  }
  for std in c++17 c++20; do
    [ "$(left)" -gt 130 ] || break
    echo "-- -std=$std" >>"$OUT/build.log"
    cxx_build $std >>"$OUT/build.log" 2>&1 && break
  done
fi
echo "check built in $((SECONDS - START)) s" | tee -a "$OUT/env.txt"
if [ -x "$CHECK" ]; then
  ROWS=(); [ -s .devcarry/ml_rows.txt ] && ROWS=(--rows .devcarry/ml_rows.txt)
  echo "rows: ${ROWS[*]:-generated by the check}" | tee -a "$OUT/env.txt"
  ldd "$CHECK" | grep -E 'torch|c10|cuda' >>"$OUT/build.log"
  timeout "$(budget 15)" "$CHECK" --models models "${ROWS[@]}" \
    --device auto --timing-requests 100 --out "$OUT/ml_check.json" 2>&1 |
    tee "$OUT/ml_check.txt"
  echo "check exit status: ${PIPESTATUS[0]}" | tee -a "$OUT/ml_check.txt"
else
  echo "FAILED: gpuest-ml-check did not build; build.log says why" | tee "$OUT/ml_check.txt"
  tail -n 40 "$OUT/build.log"
fi

# 3. The full server with --device cuda, where its dependencies are here.
SERVER_TXT="$OUT/server.txt"
missing=()
have_pc() { pkg-config --exists "$1" 2>/dev/null; }
have_header() { echo "#include <$1>" | c++ -x c++ -fsyntax-only - >/dev/null 2>&1; }
command -v pkg-config >/dev/null || missing+=("pkg-config (Debian pkg-config)")
command -v protoc >/dev/null || missing+=("protoc (Debian protobuf-compiler)")
command -v grpc_cpp_plugin >/dev/null || missing+=("grpc_cpp_plugin (Debian protobuf-compiler-grpc)")
command -v grpc_python_plugin >/dev/null || missing+=("grpc_python_plugin (Debian protobuf-compiler-grpc)")
have_header grpcpp/grpcpp.h || missing+=("gRPC C++ headers and gRPCConfig.cmake (Debian libgrpc++-dev)")
have_header google/protobuf/message.h || missing+=("protobuf C++ headers (Debian libprotobuf-dev)")
have_header absl/status/status.h || missing+=("Abseil headers and abslConfig.cmake (Debian libabsl-dev)")
have_header spdlog/spdlog.h || missing+=("spdlog (Debian libspdlog-dev)")
have_header nlohmann/json.hpp || missing+=("nlohmann/json (Debian nlohmann-json3-dev)")
have_header simdjson.h || missing+=("simdjson (Debian libsimdjson-dev)")
have_pc libmicrohttpd || missing+=("libmicrohttpd (Debian libmicrohttpd-dev)")
have_pc gnutls || missing+=("GnuTLS (Debian libgnutls28-dev)")
ls /opt/gpuest-deps/lib*/cmake/prometheus-cpp >/dev/null 2>&1 ||
  missing+=("prometheus-cpp in /opt/gpuest-deps (deploy/install-deps.sh builds it)")
# The main configure also generates the Python stubs and builds the Go client.
[ -x /usr/bin/python3 ] || missing+=("/usr/bin/python3 (proto/CMakeLists.txt: the Python stubs)")
for tool in go gofmt protoc-gen-go protoc-gen-go-grpc; do
  command -v $tool >/dev/null || missing+=("$tool (client/go; Debian golang-go, protoc-gen-go, protoc-gen-go-grpc)")
done
{
  echo "== the full server with --device cuda"
  if [ "${GPUEST_ML_SERVER:-1}" = 0 ]; then
    echo "NOT RUN: GPUEST_ML_SERVER=0"
  elif [ ${#missing[@]} -gt 0 ]; then
    echo "NOT RUN: gpuest-server cannot be built here; missing:"
    printf '  - %s\n' "${missing[@]}"
    echo "(the check above needs none of them; deploy/install-deps.sh installs them where"
    echo " apt reaches Debian's archive)"
  elif [ "$(left)" -lt 120 ]; then
    echo "NOT RUN: $(left) s left of the lease's $LIMIT_S s, too few to build the server"
  else
    B=/tmp/gpuest-build-cuda
    timeout "$(budget 60)" cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DGPUEST_BUILD_TESTS=OFF -DGPUEST_BUILD_BENCH=OFF \
      -DCMAKE_PREFIX_PATH="$TORCH_PREFIX;/opt/gpuest-deps" "${CUDA_ARGS[@]}" \
      >"$OUT/server_build.log" 2>&1 &&
      timeout "$(budget 45)" cmake --build $B -j "$JOBS" --target gpuest-server gpuest \
        >>"$OUT/server_build.log" 2>&1
    if [ ! -x $B/server/gpuest-server ] || [ ! -x $B/client/gpuest ]; then
      echo "NOT RUN: the server did not build in time or at all:"
      tail -n 30 "$OUT/server_build.log"
    else
      READY=/tmp/gpuest-ready.$$
      $B/server/gpuest-server --device cuda --models models --listen 127.0.0.1:50151 \
        --metrics-listen 127.0.0.1:9151 --ready-file $READY 2>/tmp/gpuest-server.log &
      SERVER_PID=$!
      for _ in $(seq 60); do [ -e $READY ] && break; sleep 0.5; done
      echo "-- server log"; cat /tmp/gpuest-server.log
      echo "-- gpuest models"
      $B/client/gpuest --target 127.0.0.1:50151 models
      echo "-- gpuest estimate examples/cnn.json (one Estimate)"
      $B/client/gpuest --target 127.0.0.1:50151 estimate examples/cnn.json
      echo "-- /metrics"
      curl -s http://127.0.0.1:9151/metrics | grep -E '^gpuest_(estimator|models)_info'
      kill "$SERVER_PID"; wait "$SERVER_PID"
    fi
  fi
} 2>&1 | tee "$SERVER_TXT"
{ nvidia-smi --query-gpu=memory.used --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"; } |
  sed 's/^/gpu memory used at the end: /' | tee -a "$OUT/env.txt"
echo "done in $((SECONDS - START)) s" | tee -a "$OUT/env.txt"
ls -la "$OUT"
