#!/usr/bin/env python3
"""The Go client against the C++ client, in one run against one gpuest-server.

Starts build/server/gpuest-server on loopback, then, for one Estimate
(examples/mlp.json by default) and one CheckPlacement (bench/check_placement.json: a
node-reported GPU, a measured job on it and a candidate given by its estimate, what a
scheduler plugin's Filter sends) at each concurrency (1 and 32), runs the C++ client's
load generator (build/bench/gpuest-loadgen) and the Go client's
(build/client/go/bin/gpuest-go-loadgen) in turn, the order alternating per round, and
prints p50 and p99 of each, the Go client's as a ratio to the C++ client's, the Go
client's heap allocations per call and each client's CPU time per call.

The goal (issue 49): the Go client's p50 within 1.5x the C++ client's at concurrency 1.
Both clients and the server share the machine's cores: at concurrency 32 the figures
say as much about that as about either client.

    bench/go_client_vs_cpp.py [--build build] [--duration 5] [--rounds 2]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
GRPC_LINE = re.compile(r"^grpc: calls=(\d+) throughput=(\d+)/s p50=(\d+)us p99=(\d+)us "
                       r"p999=(\d+)us errors=(\d+)", re.M)
ALLOCS_LINE = re.compile(r"^allocations per call: ([\d.]+) \((\d+) bytes\)", re.M)
CPU_LINE = re.compile(r"^client CPU per gRPC call: (\d+)us", re.M)


def start_server(build, workdir):
    ready = os.path.join(workdir, "ready.json")
    log = open(os.path.join(workdir, "server.log"), "w")
    proc = subprocess.Popen(
        [os.path.join(build, "server", "gpuest-server"), "--listen=127.0.0.1:0",
         "--metrics-listen=", f"--models={os.path.join(REPO, 'models')}",
         f"--ready-file={ready}"], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while not os.path.exists(ready):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            sys.exit(f"gpuest-server did not start: {open(log.name).read()}")
        time.sleep(0.05)
    time.sleep(0.05)  # The file is written whole before it is renamed; be safe anyway.
    with open(ready) as f:
        return proc, f"127.0.0.1:{json.load(f)['grpc_port']}"


def run(program, target, rpc, request, concurrency, args):
    cmd = [program, f"--target={target}", f"--rpc={rpc}", f"--request={request}",
           f"--concurrency={concurrency}", f"--duration={args.duration}s",
           f"--warmup={args.warmup}s", f"--deadline={args.deadline}s"]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    m = GRPC_LINE.search(out.stdout)
    if out.returncode != 0 or not m:
        sys.exit(f"{' '.join(cmd)}: exit {out.returncode}\n{out.stdout}{out.stderr}")
    r = {"calls": int(m[1]), "p50": float(m[3]), "p99": float(m[4])}
    if a := ALLOCS_LINE.search(out.stdout):
        r["allocs"], r["alloc_bytes"] = float(a[1]), float(a[2])
    if c := CPU_LINE.search(out.stdout):
        r["cpu_us"] = float(c[1])
    return r


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default=os.path.join(REPO, "build"))
    parser.add_argument("--duration", type=float, default=5, help="seconds measured per run")
    parser.add_argument("--warmup", type=float, default=1)
    parser.add_argument("--deadline", type=float, default=5, help="per call, seconds")
    parser.add_argument("--rounds", type=int, default=2,
                        help="runs of each client per case; the median is reported")
    parser.add_argument("--concurrency", default="1,32")
    parser.add_argument("--estimate-request", default="examples/mlp.json")
    parser.add_argument("--placement-request", default="bench/check_placement.json")
    args = parser.parse_args()
    cpp = os.path.join(args.build, "bench", "gpuest-loadgen")
    go = os.path.join(args.build, "client", "go", "bin", "gpuest-go-loadgen")
    for program in (cpp, go):
        if not os.access(program, os.X_OK):
            sys.exit(f"{program} is not built (ninja -C build gpuest-loadgen gpuest_go)")

    with tempfile.TemporaryDirectory(prefix="gpuest-go-bench-") as workdir:
        server, target = start_server(args.build, workdir)
        try:
            rows = []
            for rpc, request in (("estimate", args.estimate_request),
                                 ("check_placement", args.placement_request)):
                for concurrency in [int(c) for c in args.concurrency.split(",")]:
                    runs = {"cpp": [], "go": []}
                    for round_ in range(args.rounds):
                        order = ("cpp", "go") if round_ % 2 == 0 else ("go", "cpp")
                        for client in order:
                            program = cpp if client == "cpp" else go
                            runs[client].append(run(program, target, rpc, request,
                                                    concurrency, args))
                    rows.append((rpc, concurrency, runs))
        finally:
            server.terminate()
            server.wait(timeout=30)

    def median(runs, key):
        values = [r[key] for r in runs if key in r]
        return statistics.median(values) if values else float("nan")

    print(f"server {target}; {args.rounds} runs of {args.duration:g} s per client and case "
          f"(median); Estimate: {args.estimate_request}, CheckPlacement: "
          f"{args.placement_request}")
    print(f"{'rpc':16} {'c':>3} {'C++ p50':>8} {'Go p50':>8} {'x':>5} {'C++ p99':>8} "
          f"{'Go p99':>8} {'x':>5} {'Go allocs/call':>15} {'CPU/call C++ Go':>16}")
    goal = None
    for rpc, concurrency, runs in rows:
        c50, g50 = median(runs["cpp"], "p50"), median(runs["go"], "p50")
        c99, g99 = median(runs["cpp"], "p99"), median(runs["go"], "p99")
        allocs = median(runs["go"], "allocs")
        alloc_bytes = median(runs["go"], "alloc_bytes")
        print(f"{rpc:16} {concurrency:>3} {c50:>6.0f}us {g50:>6.0f}us {g50 / c50:>5.2f} "
              f"{c99:>6.0f}us {g99:>6.0f}us {g99 / c99:>5.2f} "
              f"{allocs:>6.0f} ({alloc_bytes / 1024:>4.1f} KiB) "
              f"{median(runs['cpp'], 'cpu_us'):>6.0f}us {median(runs['go'], 'cpu_us'):>5.0f}us")
        if concurrency == 1:
            goal = (goal or True) and g50 / c50 <= 1.5
    if goal is not None:
        print("goal (Go p50 within 1.5x the C++ client's at c=1): " + ("met" if goal else "MISSED"))
    return 0 if goal in (None, True) else 1


if __name__ == "__main__":
    sys.exit(main())
