"""The Python client's CPU per Estimate call beside the C++ client's, in one run against
one real server (issue "scale": a dict per call within 1.3x of the C++ client).

Starts build/server/gpuest-server on a free loopback port with the repository's models,
then for each description file: the C++ client's own CPU per call (gpuest-loadgen, one
call outstanding), and this process's CPU per call (time.process_time, every thread)
for the Python client handed the same dict each call, and handed the parsed message.

    PYTHONPATH=python:build/python /usr/bin/python3 python/bench/bench_client.py
    PYTHONPATH=python:build/python /usr/bin/python3 python/bench/bench_client.py \\
        --calls 500 examples/cnn.json tests/data/traces/encoder96_b8.json
"""
from __future__ import annotations

import argparse
import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def python_cpu_per_call_us(client, model, calls: int) -> float:
    for _ in range(20):  # warm: the channel, the prepared request
        client.estimate(model)
    start = time.process_time()
    for _ in range(calls):
        client.estimate(model)
    return 1e6 * (time.process_time() - start) / calls


def cpp_cpu_per_call_us(target: str, path: Path, seconds: int) -> float:
    out = subprocess.run(
        [str(ROOT / "build/bench/gpuest-loadgen"), f"--target={target}", "--concurrency=1",
         f"--duration={seconds}s", f"--request={path}"],
        capture_output=True, text=True, check=True).stdout
    match = re.search(r"client CPU per gRPC call: (\d+)us", out)
    if not match:
        raise SystemExit(f"gpuest-loadgen printed no CPU per call:\n{out}")
    return float(match.group(1))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("descriptions", nargs="*",
                   default=["examples/cnn.json", "tests/data/traces/encoder96_b8.json"])
    p.add_argument("--calls", type=int, default=300, help="Python calls per measurement")
    p.add_argument("--seconds", type=int, default=5, help="gpuest-loadgen's duration")
    args = p.parse_args()

    import gpuest
    from google.protobuf import json_format

    port = free_port()
    server = subprocess.Popen(
        [str(ROOT / "build/server/gpuest-server"), f"--listen=127.0.0.1:{port}",
         f"--models={ROOT / 'models'}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    target = f"127.0.0.1:{port}"
    try:
        with gpuest.Client(target, timeout=30) as client:
            client.health(timeout=60)  # waits until it serves
            print("| description | C++ client | Python, a dict per call | ratio | "
                  "Python, a message | ratio |")
            print("|---|---|---|---|---|---|")
            for name in args.descriptions:
                path = ROOT / name
                model = json.loads(path.read_text())
                message = json_format.ParseDict(model, gpuest.v1.ModelDescription())
                cpp = cpp_cpu_per_call_us(target, path, args.seconds)
                as_dict = python_cpu_per_call_us(client, model, args.calls)
                as_message = python_cpu_per_call_us(client, message, args.calls)
                print(f"| {name} | {cpp:.0f} us | {as_dict:.0f} us | {as_dict / cpp:.2f}x | "
                      f"{as_message:.0f} us | {as_message / cpp:.2f}x |")
    finally:
        server.terminate()
        server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
