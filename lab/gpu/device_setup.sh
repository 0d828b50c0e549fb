# shellcheck shell=bash
# Sourced first by each lab/gpu/device_run*.sh, which the device tool runs on a leased
# GPU machine with the repository root as the working directory. It gives them:
#  - bash's -u and pipefail (not -e: one failed step does not end the lease);
#  - OUT, the device tool's output folder, else ./device-out, created;
#  - PYTHONUNBUFFERED=1, so that a log cut off by a timeout has the lines before it;
#  - unpack_timm_src: the carried timm source (.devcarry/timm-src-*.tar.gz) unpacked
#    into /tmp/timm-src; TIMM_SRC, the folder to put on PYTHONPATH for it;
#  - start_env_txt FIELDS: nvidia-smi's FIELDS of the GPU (csv) as a new $OUT/env.txt,
#    shown too; the script appends its stack's versions (tee -a "$OUT/env.txt").
set -uo pipefail
OUT="${OUT:-device-out}"; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# shellcheck disable=SC2034  # read by the scripts that source this file
TIMM_SRC=/tmp/timm-src/timm

unpack_timm_src() {
  mkdir -p /tmp/timm-src && tar -xzf .devcarry/timm-src-*.tar.gz -C /tmp/timm-src
}

start_env_txt() {
  nvidia-smi --query-gpu="$1" --format=csv | tee "$OUT/env.txt"
}
