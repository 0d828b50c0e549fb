#!/usr/bin/env bash
# Installs what gpuest needs on Debian 12 (bookworm): Debian's packages, plus
# prometheus-cpp built from Debian's own trixie source archive into a private prefix
# (bookworm does not package it). Idempotent: a second run checks and returns.
#
# Usage: deploy/install-deps.sh [PREFIX]   (PREFIX defaults to /opt/gpuest-deps)
# Needs root for apt; run it with sudo otherwise.
set -euo pipefail

PREFIX=${1:-${GPUEST_DEPS_PREFIX:-/opt/gpuest-deps}}
PROM_VERSION=1.0.2
PROM_SHA256=65838fed64c4667140a574b78eb9f5c995bab80d575b082c9c677c6795c3c607

PACKAGES=(
  build-essential cmake ninja-build pkg-config git ca-certificates curl
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev nlohmann-json3-dev libtorch-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcivetweb-dev civetweb zlib1g-dev
  python3 python3-pytest python3-torch python3-torchvision python3-protobuf python3-grpcio
  python3-venv python3-pip python3-setuptools python3-wheel mypy
  clang-format
  # lint.FunctionLength reads the functions' extents with Universal Ctags.
  universal-ctags
  # tests: the TLS tests' certificates (openssl); YAML (gpuest-collect's plans, the
  # deploy files' validation); promtool, which Debian ships in the prometheus package
  # (a machine with systemd also gets a prometheus service, disabled again below).
  openssl python3-yaml
  prometheus
  # tests/fuzz: libFuzzer targets (deploy/fuzz.sh), built with clang in build-fuzz/.
  clang-14 libclang-rt-14-dev
  # the HTTP entry points (server/http_front: the extender, the admission webhook) and the on-demand
  # JSON parser that reads kube-scheduler's bodies (integrations/kubernetes/extender_args)
  libmicrohttpd-dev libgnutls28-dev libsimdjson-dev
  # the tests' and benchmarks' HTTP(S) client; HTTP/2 peers for the hostile suite's
  # transport rows (tests/hostile/h2_peer.py) and nghttp2's tools for poking by hand
  libcpp-httplib-dev python3-h2 nghttp2-client
  # integrations/slurm/tests: the job_submit plugin (integrations/slurm) on a real Slurm 22.05: the
  # controller, a node daemon, sbatch/scontrol, munge for their authentication
  # (job_submit_lua.so and cli_filter_lua.so come with slurm-wlm-basic-plugins, which
  # these pull in), and the Lua 5.1 interpreter that runs the plugin's unit tests.
  # Services are disabled again below: the test starts its own, in a temporary directory.
  slurmctld slurmd slurm-client munge lua5.1
  # client/go: Go 1.19, grpc-go 1.33 and protobuf-go 1.28 built offline in GOPATH mode, and
  # the protoc plugins for its stubs. golang-github-golang-protobuf-1-5-dev is needed:
  # with only the older golang-goprotobuf-dev, grpc-go marshals protoc-gen-go 1.28's
  # messages through the old table marshaller and panics.
  golang-go golang-google-grpc-dev golang-google-protobuf-dev
  golang-github-golang-protobuf-1-5-dev protoc-gen-go protoc-gen-go-grpc
)

log() { printf '[install-deps] %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${#missing[@]} Debian packages: ${missing[*]}"
  as_root apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
  # Only promtool is wanted from the prometheus package, not a server on :9090; and no
  # Slurm or munge daemons (the Slurm test runs its own).
  if [ -d /run/systemd/system ]; then
    for service in prometheus slurmctld slurmd munge; do
      if [[ " ${missing[*]} " == *" $service "* ]]; then
        as_root systemctl disable --now "$service" >/dev/null 2>&1 || true
      fi
    done
  fi
else
  log "Debian packages: all present"
fi
# kubectl, for the tests' offline dry-runs of deploy/kubernetes (tests/deploy): Debian's
# kubernetes-client, unless a kubectl is installed already (another vendor's package
# would conflict with it).
if ! command -v kubectl >/dev/null 2>&1; then
  log "installing kubernetes-client (kubectl)"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    kubernetes-client
fi

# tests/dra: what judges the DRA claims gpuest writes, from npm (its lock file pins
# them): the resource.k8s.io/v1 schema (kubernetes-models) and a CEL evaluator
# (@bufbuild/cel), into $PREFIX/node/node_modules. Debian's nodejs and npm, unless a
# node is installed already. A second run with the same lock does nothing; without the
# registry it keeps what an earlier run installed.
if ! command -v npm >/dev/null 2>&1; then
  log "installing nodejs and npm"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    nodejs npm
fi
node_dir="$PREFIX/node"
dra_tests="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/dra"
if [ -d "$node_dir/node_modules/kubernetes-models" ] &&
  cmp -s "$dra_tests/package-lock.json" "$node_dir/installed.lock"; then
  log "npm packages of tests/dra: present in $node_dir"
else
  as_root mkdir -p "$node_dir"
  as_root cp "$dra_tests/package.json" "$dra_tests/package-lock.json" "$node_dir/"
  if (cd "$node_dir" && as_root npm ci --no-audit --no-fund --loglevel=error >&2); then
    as_root cp "$dra_tests/package-lock.json" "$node_dir/installed.lock"
    log "npm packages of tests/dra installed in $node_dir"
  elif [ -d "$node_dir/node_modules/kubernetes-models" ]; then
    log "npm ci failed (offline?): keeping the packages already in $node_dir"
  else
    log "npm ci failed: the DRA schema and CEL tests (dra.*) will fail until it succeeds"
  fi
fi

if [ -f "$PREFIX/lib/cmake/prometheus-cpp/prometheus-cpp-config.cmake" ]; then
  log "prometheus-cpp: present in $PREFIX"
  exit 0
fi

log "building prometheus-cpp $PROM_VERSION into $PREFIX"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The archive URI comes from this machine's own apt configuration, so no host name
# is written into the project.
uri=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
if [ -z "$uri" ]; then
  uri=$(awk '$1 == "deb" && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
fi
[ -n "$uri" ] || { log "cannot find a Debian archive URI in the apt configuration"; exit 1; }
mkdir -p "$work/lists/partial" "$work/src"
echo "deb-src [trusted=yes] $uri trixie main" >"$work/sources.list"
apt_opts=(-o "Dir::Etc::sourcelist=$work/sources.list" -o "Dir::Etc::sourceparts=/dev/null"
  -o "Dir::State::Lists=$work/lists" -o "APT::Get::List-Cleanup=0")
as_root apt-get "${apt_opts[@]}" update -q >/dev/null
(cd "$work/src" && as_root apt-get "${apt_opts[@]}" source --download-only "prometheus-cpp=$PROM_VERSION-*" >/dev/null 2>&1 ||
  as_root apt-get "${apt_opts[@]}" source --download-only prometheus-cpp >/dev/null 2>&1 || true)
tarball="$work/src/prometheus-cpp_${PROM_VERSION}.orig.tar.gz"
[ -f "$tarball" ] || { log "download of prometheus-cpp source failed"; exit 1; }
echo "$PROM_SHA256  $tarball" | sha256sum -c --quiet - || { log "prometheus-cpp checksum mismatch"; exit 1; }
tar -xzf "$tarball" -C "$work"
srcdir=$(find "$work" -maxdepth 1 -type d -name 'prometheus-cpp*' | head -1)
cmake -S "$srcdir" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$PREFIX" -DUSE_THIRDPARTY_LIBRARIES=OFF -DENABLE_PUSH=OFF \
  -DENABLE_TESTING=OFF -DBUILD_SHARED_LIBS=ON -DCMAKE_INSTALL_RPATH="$PREFIX/lib" >/dev/null
cmake --build "$work/build" -j"$(nproc)" >/dev/null
as_root cmake --install "$work/build" >/dev/null
log "prometheus-cpp installed in $PREFIX"
