#!/usr/bin/python3
"""Whether a crowd of slow senders starves the server's HTTP front (issue 34, D4).

Starts gpuest-server with the extender on (and, with --admission, the admission
webhook over HTTPS), opens --senders connections to one of its HTTP ports that each
send one header line every --every seconds and never finish their request, and meanwhile
probes, --probe-every seconds, GET /healthz on that port (a new connection each time) and
gRPC grpc.health.v1.Health/Check. Prints each probe's latency quantiles and how many
took over 100 ms or failed. Run it for two builds, one after the other, to compare fronts.

  python3 bench/slow_senders.py --server build/server/gpuest-server --senders 500
"""

import argparse
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

import grpc

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start_server(args, workdir):
    ready = os.path.join(workdir, "ready.json")
    argv = [args.server, "--listen=127.0.0.1:0", "--metrics-listen=",
            f"--models={os.path.join(REPO, 'models')}", f"--ready-file={ready}",
            "--extender-listen=127.0.0.1:0", "--log-level=warn"]
    if args.admission:
        cert, key = make_certificate(workdir)
        argv += ["--admission-listen=127.0.0.1:0", f"--admission-tls-cert={cert}",
                 f"--admission-tls-key={key}"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while not os.path.exists(ready):
        if proc.poll() is not None or time.time() > deadline:
            sys.exit("gpuest-server did not start: " + proc.stderr.read().decode())
        time.sleep(0.05)
    return proc, json.load(open(ready))


def make_certificate(workdir):
    cert, key = os.path.join(workdir, "tls.crt"), os.path.join(workdir, "tls.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", key, "-out", cert], check=True, capture_output=True)
    return cert, key


def slow_senders(port, count, every, stop, opened):
    socks = []
    for _ in range(count):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
            s.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\n")
            socks.append(s)
        except OSError:
            break
    opened.append(len(socks))
    line = 0
    while not stop.is_set():
        for s in list(socks):
            try:
                s.sendall(b"X-Slow-%d: y\r\n" % line)
            except OSError:
                socks.remove(s)  # The server closed it: one sender fewer.
        line += 1
        stop.wait(every)
    opened.append(len(socks))
    for s in socks:
        s.close()


def probe_healthz(port, use_tls):
    start = time.perf_counter()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        # As curl and Go's net/http do: without it, the request written right after the
        # TLS handshake waits ~40 ms on the probe's own Nagle and the server's delayed ACK.
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if use_tls:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            s = ctx.wrap_socket(s)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        reply = s.recv(64)
        s.close()
        ok = reply.startswith(b"HTTP/1.1 200")
    except OSError:
        ok = False
    return time.perf_counter() - start, ok


def probe_grpc(check):
    start = time.perf_counter()
    try:
        check(b"", timeout=5)
        ok = True
    except grpc.RpcError:
        ok = False
    return time.perf_counter() - start, ok


def summary(name, samples):
    latencies = sorted(t for t, _ in samples)
    failed = sum(1 for _, ok in samples if not ok)
    slow = sum(1 for t in latencies if t > 0.1)
    q = lambda p: latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1e3
    print(f"{name:10s} n={len(samples):4d} p50={q(0.5):8.2f} ms p99={q(0.99):8.2f} ms "
          f"max={latencies[-1] * 1e3:8.2f} ms  >100ms={slow} failed={failed}")
    return slow + failed


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", default=os.path.join(REPO, "build/server/gpuest-server"))
    p.add_argument("--senders", type=int, default=500)
    p.add_argument("--every", type=float, default=0.2, help="seconds between a sender's lines")
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--probe-every", type=float, default=0.1)
    p.add_argument("--admission", action="store_true",
                   help="aim the senders at the admission webhook's HTTPS port instead")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        proc, ports = start_server(args, workdir)
        try:
            port = ports["admission_port"] if args.admission else ports["extender_port"]
            stop, opened = threading.Event(), []
            crowd = threading.Thread(target=slow_senders,
                                     args=(port, args.senders, args.every, stop, opened))
            crowd.start()
            while not opened:
                time.sleep(0.01)
            channel = grpc.insecure_channel(f"127.0.0.1:{ports['grpc_port']}")
            check = channel.unary_unary("/grpc.health.v1.Health/Check")
            health, grpc_health = [], []
            end = time.time() + args.seconds
            while time.time() < end:
                health.append(probe_healthz(port, args.admission))
                grpc_health.append(probe_grpc(check))
                time.sleep(args.probe_every)
            stop.set()
            crowd.join()
            print(f"{opened[0]} slow senders connected, {opened[-1]} still connected "
                  f"after {args.seconds:.0f} s (one header line each every {args.every} s)")
            bad = summary("/healthz", health) + summary("gRPC Health", grpc_health)
            alive = proc.poll() is None
            print("server", "still running" if alive else f"exited {proc.returncode}")
            return 0 if bad == 0 and alive else 1
        finally:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    sys.exit(main())
