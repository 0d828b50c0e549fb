#!/usr/bin/python3
"""What a hostile peer at the transport makes the server hold (issue 45), row by row.

For each row, starts a fresh gpuest-server (gRPC, the extender's HTTP port, /metrics),
warms it with a few Estimates, takes its RSS as the baseline, then runs the row for
--seconds from 1 and from 4 connections (one process each) while probing gRPC Health and
GET /healthz on every HTTP port every 0.2 s on new connections. Prints, per row: RSS peak
during the run and 5 s after, as a difference from and a ratio to the baseline; probe
p99 per port and failures; what the server did (GOAWAYs, closed connections, refused
streams). The goal: peak within 64 MiB of the baseline, back within 16 MiB 5 s after,
probe p99 <= 100 ms on every port. The peers run at nice 10 (PEER_NICE): what separate
machines give a server; at equal priority on a 2-core machine the probe client itself
waits for the cores.

  /usr/bin/python3 bench/transport_abuse.py --seconds 30
"""
import argparse
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "hostile"))

import h2_peer  # noqa: E402

MIB = 1 << 20
# The peers' niceness: a hostile client is another machine's load, not the server's
# (h2_peer.run_in_processes says why this matters on a 2-core machine).
PEER_NICE = 10


def warm(server, message):
    import grpc
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        call = channel.unary_unary(h2_peer.ESTIMATE_PATH)
        for _ in range(20):
            call(message, timeout=10)


def run_row(args, name, connections, message):
    server = h2_peer.ServerUnderTest(args.server, args.models,
                                     ["--log-level=warn", *args.server_flag])
    try:
        warm(server, message)
        time.sleep(1)
        baseline = server.rss()
        if name == "rapid-reset":
            results, peak, probes = h2_peer.run_measured(
                server, h2_peer.rapid_reset, [(server.grpc_port, message)] * connections,
                args.seconds, nice=PEER_NICE)
        elif name == "unread-streams":
            results, peak, probes = h2_peer.run_measured(
                server, h2_peer.unread_streams,
                [(server.grpc_port, message, 10000)] * connections, args.seconds,
                nice=PEER_NICE)
        elif name == "trickle":
            per = args.trickle_connections // connections
            results, peak, probes = h2_peer.run_measured(
                server, h2_peer.trickle_connections,
                [(server.extender_port, per)] * connections, args.seconds, nice=PEER_NICE)
        else:
            raise SystemExit(f"unknown row {name}")
        time.sleep(5)
        after = server.rss()
        alive = server.proc.poll() is None
        streams = sum(r.streams for r in results)
        goaways = sum(len(r.goaways) for r in results)
        closed = sum(r.closed_by_server for r in results)
        refused = sum(r.refused_streams for r in results)
        advertised = {r.max_streams_advertised for r in results}
        line = (f"| {name} | {connections} | {streams} ({streams / args.seconds:.0f}/s) | "
                f"{baseline / MIB:.0f} | {(peak - baseline) / MIB:+.0f} "
                f"(x{peak / baseline:.2f}) | {(after - baseline) / MIB:+.0f} | ")
        for key in probes.latencies:
            line += (f"{key} p99 {probes.p99(key) * 1e3:.1f} ms"
                     f"{' (' + str(probes.failures[key]) + ' failed)' if probes.failures[key] else ''}; ")
        line += (f"| GOAWAY {goaways}, closed {closed}, refused streams {refused}, "
                 f"MAX_CONCURRENT_STREAMS {advertised} | {'up' if alive else 'DIED'} |")
        print(line, flush=True)
        for r in results:
            for error in r.errors:
                print(f"  peer error: {error}", flush=True)
    finally:
        server.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", default=os.path.join(REPO, "build/server/gpuest-server"))
    p.add_argument("--models", default=os.path.join(REPO, "models"))
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--rows", default="rapid-reset,unread-streams,trickle")
    p.add_argument("--connections", default="1,4")
    p.add_argument("--server-flag", action="append", default=[],
                   help="a flag for gpuest-server (repeat), e.g. --grpc-max-resets-per-second=0 "
                        "to measure without the rapid-reset guard")
    p.add_argument("--trickle-connections", type=int, default=3000,
                   help="connections the trickle row keeps open, over all its processes")
    args = p.parse_args()
    message = h2_peer.estimate_request_bytes(REPO)
    print("| row | connections | streams sent | baseline RSS MiB | peak - baseline MiB | "
          "5 s after - baseline MiB | probe p99 | what the server did | server |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.rows.split(","):
        for connections in map(int, args.connections.split(",")):
            run_row(args, name, connections, message)


if __name__ == "__main__":
    main()
