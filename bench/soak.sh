#!/usr/bin/env bash
# Soak run: a real gpuest-server under high, steady load for a long time (ten minutes
# by default), with its resident memory (RSS) sampled every few seconds and the
# latency of each load window, to see leaks, creeping latency or failures that a
# short benchmark cannot. Not part of CI (it runs for ten minutes on purpose).
#
# Usage: bench/soak.sh [--duration 600] [--window 30] [--concurrency 32]
#                      [--request examples/cnn.json] [--out DIR] [-- server flags...]
# Needs a build (deploy/build.sh): build/server/gpuest-server and
# build/bench/gpuest-loadgen. Writes DIR/rss.csv (seconds, rss_kib), DIR/windows.csv
# (one line per load window: seconds, calls, throughput, p50/p99/p999 us, errors),
# DIR/server.log, and prints a summary. Exit 1 when a call failed or the server died.
set -euo pipefail
cd "$(dirname "$0")/.."

duration=600 window=30 concurrency=32 request=examples/cnn.json out="" sample=5
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) duration=$2; shift 2 ;;
    --window) window=$2; shift 2 ;;
    --concurrency) concurrency=$2; shift 2 ;;
    --request) request=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --sample) sample=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "soak.sh: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
server=build/server/gpuest-server loadgen=build/bench/gpuest-loadgen
for b in "$server" "$loadgen"; do
  [ -x "$b" ] || { echo "soak.sh: $b is not built (deploy/build.sh)" >&2; exit 2; }
done
out=${out:-$(mktemp -d "${TMPDIR:-/tmp}/gpuest-soak-XXXXXX")}
mkdir -p "$out"

"$server" --listen=127.0.0.1:0 --metrics-listen=127.0.0.1:0 --models=models \
  --ready-file="$out/ready.json" --log-level=warn "$@" >"$out/server.log" 2>&1 &
pid=$!
cleanup() {
  kill "${sampler:-}" 2>/dev/null || true
  kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 1200); do [ -f "$out/ready.json" ] && break; sleep 0.05; done
[ -f "$out/ready.json" ] || { echo "soak.sh: the server did not start:" >&2; cat "$out/server.log" >&2; exit 1; }
port=$(sed -E 's/.*"grpc_port":([0-9]+).*/\1/' "$out/ready.json")

start=$(date +%s)
echo "seconds,rss_kib" >"$out/rss.csv"
(
  while kill -0 "$pid" 2>/dev/null; do
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
    [ -n "$rss" ] && echo "$(($(date +%s) - start)),$rss" >>"$out/rss.csv"
    sleep "$sample"
  done
) &
sampler=$!

echo "seconds,calls,throughput_per_s,p50_us,p99_us,p999_us,errors" >"$out/windows.csv"
failed=0
echo "soak: ${duration}s at concurrency $concurrency, ${window}s windows, $request -> 127.0.0.1:$port (pid $pid); output in $out"
while [ $(($(date +%s) - start)) -lt "$duration" ]; do
  line=$("$loadgen" --target="127.0.0.1:$port" --concurrency="$concurrency" \
    --duration="${window}s" --warmup=0s --request="$request" 2>&1 | tee -a "$out/loadgen.log" |
    grep '^calls=' || true)
  if [ -z "$line" ]; then
    echo "soak: a load window produced no result (see $out/loadgen.log)" >&2
    failed=1
    break
  fi
  # calls=N throughput=N/s p50=Nus p99=Nus p999=Nus errors=N
  csv=$(echo "$line" | sed -E 's/calls=([0-9]+) throughput=([0-9.]+)\/s p50=([0-9.]+)us p99=([0-9.]+)us p999=([0-9.]+)us errors=([0-9]+)/\1,\2,\3,\4,\5,\6/')
  echo "$(($(date +%s) - start)),$csv" >>"$out/windows.csv"
  echo "  t=$(($(date +%s) - start))s $line"
  [ "${csv##*,}" = 0 ] || failed=1
  kill -0 "$pid" 2>/dev/null || { echo "soak: the server died" >&2; failed=1; break; }
done

awk -F, 'NR > 1 {n++; rss[n] = $2; if ($2 > max) max = $2}
  END {
    q = int(n / 4); if (q < 1) q = 1
    for (i = 1; i <= q; i++) first += rss[i]
    for (i = n - q + 1; i <= n; i++) last += rss[i]
    printf "RSS: %d samples, first %.1f MiB, last %.1f MiB, max %.1f MiB; mean of the last quarter vs the first: %+.1f MiB\n",
      n, rss[1] / 1024, rss[n] / 1024, max / 1024, (last - first) / q / 1024
  }' "$out/rss.csv"
awk -F, 'NR > 1 {n++; calls += $2; err += $7; tput += $3; if ($5 > p99max) p99max = $5
    p99[n] = $5; p50[n] = $4}
  END {
    printf "latency: %d windows, %d calls, %.0f calls/s mean; p50 first %d us, last %d us; p99 first %d us, last %d us, worst %d us; errors %d\n",
      n, calls, tput / n, p50[1], p50[n], p99[1], p99[n], p99max, err
  }' "$out/windows.csv"
exit "$failed"
