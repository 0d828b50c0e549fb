"""The transport rows of the hostile suite (issue 45): what one peer at the protocol level
makes the server hold, against the real server started as the deployment starts it.

Each row runs a hostile peer (tests/hostile/h2_peer.py, python3-h2) in processes of its
own for a few seconds while probes from another address check that health answers on
every port, and asserts the server's RSS and what it said to the peer. The bounds here
have margins a loaded 2-core machine keeps; bench/transport_abuse.py measures the same
rows for 30 s against the issue's goals (64 MiB, 100 ms).

ctest runs it (hostile.Transport); by hand:
  GPUEST_SERVER=build/server/gpuest-server /usr/bin/python3 -m pytest -q tests/hostile
"""
import os
import socket
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

import h2_peer  # noqa: E402

SERVER = os.environ.get("GPUEST_SERVER", os.path.join(REPO, "build", "server", "gpuest-server"))
MODELS = os.environ.get("GPUEST_MODELS", os.path.join(REPO, "models"))
MIB = 1 << 20
ROW_SECONDS = float(os.environ.get("GPUEST_HOSTILE_SECONDS", "6"))


@pytest.fixture(scope="module")
def message():
    return h2_peer.estimate_request_bytes(REPO)


@pytest.fixture
def server():
    s = h2_peer.ServerUnderTest(SERVER, MODELS, ["--log-level=warn"])
    yield s
    s.stop()  # Asserts a clean exit, with the server's log.


def estimate(port, message, timeout=10):
    import grpc
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        return channel.unary_unary(h2_peer.ESTIMATE_PATH)(message, timeout=timeout)


def warm_baseline(server, message):
    for _ in range(10):
        estimate(server.grpc_port, message)
    time.sleep(0.5)
    return server.rss()


def settle(server, baseline, within, seconds=10):
    """RSS after the peer left: the least seen over `seconds` (allocators return memory
    in steps), stopping early once within `within` of the baseline."""
    least = server.rss()
    deadline = time.monotonic() + seconds
    while least - baseline > within and time.monotonic() < deadline:
        time.sleep(0.25)
        least = min(least, server.rss())
    return least


run_row = h2_peer.run_measured


def assert_probes_answered(probes):
    for key, latencies in probes.latencies.items():
        assert probes.failures[key] == 0, f"{key}: {probes.failures[key]} probes failed"
        assert latencies, f"{key}: no probe ran"
        # A loaded 2-core CI machine: the 100 ms goal is the benchmark's.
        assert probes.p99(key) < 1.0, f"{key}: p99 {probes.p99(key):.3f} s"


def test_rapid_reset_is_cut_off_and_leaves_no_memory_behind(server, message):
    baseline = warm_baseline(server, message)
    results, peak, probes = run_row(
        server, h2_peer.rapid_reset, [(server.grpc_port, message)] * 2, ROW_SECONDS)
    assert sum(r.streams for r in results) > 1000, results
    # The peer was told to calm down (GOAWAY ENHANCE_YOUR_CALM) or cut off.
    assert all(r.goaways or r.closed_by_server for r in results), results
    # Many cuts, and the log says so once per 10 s at most: the peer does not choose
    # the log's volume.
    warnings = server.log().count("cut the connection of")
    assert 1 <= warnings <= ROW_SECONDS // 10 + 1, server.log()[-2000:]
    assert peak - baseline < 96 * MIB, f"RSS grew {(peak - baseline) / MIB:.0f} MiB"
    after = settle(server, baseline, 32 * MIB)
    assert after - baseline < 32 * MIB, f"RSS {(after - baseline) / MIB:.0f} MiB above"
    assert_probes_answered(probes)
    assert server.proc.poll() is None
    estimate(server.grpc_port, message)  # Well-formed requests still answer.


def test_streams_are_bounded_per_connection(server, message):
    result = h2_peer.streams_past_the_limit(server.grpc_port, message, extra=200)
    assert result.max_streams_advertised is not None, "no MAX_CONCURRENT_STREAMS sent"
    assert 0 < result.max_streams_advertised <= 128, result.max_streams_advertised
    # Streams past the advertised limit are refused (RST_STREAM) or the connection
    # closed: none is held.
    assert result.refused_streams >= 200 or result.closed_by_server or result.goaways, result


def test_unread_answers_do_not_accumulate(server, message):
    baseline = warm_baseline(server, message)
    results, peak, probes = run_row(
        server, h2_peer.unread_streams, [(server.grpc_port, message, 10000)] * 3,
        ROW_SECONDS)
    assert peak - baseline < 64 * MIB, f"RSS grew {(peak - baseline) / MIB:.0f} MiB"
    after = settle(server, baseline, 32 * MIB)
    assert after - baseline < 32 * MIB, f"RSS {(after - baseline) / MIB:.0f} MiB above"
    assert_probes_answered(probes)


def test_a_trickling_crowd_leaves_the_extender_to_others(server, message):
    results, _, probes = run_row(
        server, h2_peer.trickle_connections, [(server.extender_port, 700)] * 3,
        ROW_SECONDS)
    # The crowd came from one address: most of its connections were refused on accept.
    assert sum(r.closed_by_server for r in results) > 0, results
    assert_probes_answered(probes)


def raw_grpc_call(port, path, body):
    """One call with an arbitrary body (not necessarily a message): (status, message)."""
    import h2.connection
    import h2.config
    import h2.events
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                                header_encoding="utf-8"))
    conn.initiate_connection()
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":path", path),
                            (":authority", "x"), ("content-type", "application/grpc"),
                            ("te", "trailers")])
    conn.send_data(sid, h2_peer.grpc_frame(body), end_stream=True)
    sock.sendall(conn.data_to_send())
    headers = {}
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                break
            for event in conn.receive_data(data):
                if isinstance(event, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                    headers.update(dict(event.headers))
                if isinstance(event, h2.events.StreamEnded):
                    return int(headers.get("grpc-status", -1)), headers.get("grpc-message", "")
                if isinstance(event, h2.events.DataReceived):
                    conn.acknowledge_received_data(event.flow_controlled_length, sid)
            sock.sendall(conn.data_to_send())
    finally:
        sock.close()
    return int(headers.get("grpc-status", -1)), headers.get("grpc-message", "")


MALFORMED = {
    "a lone tag byte": b"\x0a",
    "a length past the end": b"\x0a\xff\xff\xff\x0f",
    "a field whose length runs past its bytes": b"\x0a\x05\x08",
    "wire type 7 (does not exist)": b"\x0f",
    "a truncated varint": b"\x08\xff\xff",
    "field number 0": b"\x00\x01",
    "random bytes": bytes(range(200, 256)) * 3,
    "a deprecated group start with no end": b"\x0b",
}

METHODS = {"/gpuest.v1.Estimator/Estimate": "gpuest.v1.EstimateRequest",
           "/gpuest.v1.Estimator/ListEstimators": "gpuest.v1.ListEstimatorsRequest",
           "/gpuest.v1.Placement/CheckPlacement": "gpuest.v1.CheckPlacementRequest",
           "/gpuest.v1.Placement/RankGpus": "gpuest.v1.RankGpusRequest"}


def test_undecodable_requests_are_invalid_argument_on_every_method(server, message):
    from urllib.parse import unquote
    for path, type_name in METHODS.items():
        for what, body in MALFORMED.items():
            status, text = raw_grpc_call(server.grpc_port, path, body)
            assert status == 3, f"{path}, {what}: status {status} {text!r}"  # INVALID_ARGUMENT
            assert type_name in unquote(text), f"{path}, {what}: {text!r}"
    # A valid request with one stray byte after it is not the request either.
    status, text = raw_grpc_call(server.grpc_port, "/gpuest.v1.Estimator/Estimate",
                                 message + b"\x0f")
    assert status == 3, text
    assert raw_grpc_call(server.grpc_port, "/gpuest.v1.Estimator/Estimate", message)[0] == 0


def test_a_sequence_length_its_layers_contradict_is_refused(server):
    sys.path[:0] = [os.path.join(REPO, "build", "python"), os.path.join(REPO, "python")]
    import json
    from google.protobuf import json_format
    from gpuest.v1 import estimate_pb2
    from urllib.parse import unquote
    request = estimate_pb2.EstimateRequest(gpu="h100-80gb")
    with open(os.path.join(REPO, "examples", "transformer.json")) as f:
        json_format.ParseDict(json.load(f), request.model)
    request.model.sequence_length = 1 << 31
    del request.model.input_shape[:]  # only the layers say the sequence now
    status, text = raw_grpc_call(server.grpc_port, "/gpuest.v1.Estimator/Estimate",
                                 request.SerializeToString())
    assert status == 3, text
    assert "model.sequence_length" in unquote(text) and "model.layers[0]" in unquote(text), text
