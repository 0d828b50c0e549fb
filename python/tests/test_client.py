"""gpuest.Client against real gpuest-server processes on loopback: the calls, the
errors with the field the server named, retries within the deadline, round robin."""
import json
import os
import re
import socket
import threading
import time
import urllib.request

import grpc
import pytest
import torch.nn as nn
from google.protobuf import json_format

import gpuest
from gpuest import v1
from server_process import REPO, ServerProcess


@pytest.fixture(scope="module")
def server():
    with ServerProcess() as running:
        yield running


@pytest.fixture(scope="module")
def client(server):
    with gpuest.Client(server.target) as c:
        yield c


def _mlp():
    return gpuest.describe(nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)),
                           input_shape=(64,), batch_size=32)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_estimate_a_description(client):
    response = client.estimate(_mlp(), gpu="a100-40gb")
    assert isinstance(response, v1.EstimateResponse)
    assert response.family == v1.MODEL_FAMILY_MLP
    ids = {r.estimator_id for r in response.results}
    assert {"horus", "allocsim"} <= ids
    rec = response.recommendation
    assert rec.memory_bytes > 0 and rec.estimator_id in ids
    assert rec.fit.gpu == "a100-40gb" and rec.fit.fits
    assert rec.fit.headroom_bytes == rec.fit.capacity_bytes - rec.memory_bytes


def test_requirement_transient_and_cap(client):
    """A CNN described without saying cudnn.benchmark: the requirement to reserve, the
    benchmark search's transient beside it, and how to cap; with benchmark off, none."""
    import torchvision
    model = torchvision.models.resnet18()
    described = gpuest.describe(model, input_shape=(3, 64, 64), batch_size=8)
    assert not described.HasField("cudnn_benchmark")
    response = client.estimate(described, gpu="a100-40gb")
    rec = response.recommendation
    sim = next(r for r in response.results if r.estimator_id == rec.estimator_id)
    assert sim.memory.upper_bytes == rec.memory_bytes  # The requirement is reserved.
    t = sim.memory.transient
    assert t.cause == v1.TRANSIENT_CAUSE_CUDNN_BENCHMARK and not t.declared
    assert t.reach_bytes == rec.fit.capacity_bytes == rec.uncapped_peak_bytes
    assert rec.cap.needed and rec.cap.hami_gpumem_mib * 2**20 >= rec.memory_bytes
    assert 0 < rec.cap.per_process_memory_fraction < rec.memory_bytes / rec.fit.capacity_bytes
    off = gpuest.describe(model, input_shape=(3, 64, 64), batch_size=8,
                          cudnn_benchmark=False)
    answer = client.estimate(off, gpu="a100-40gb")
    assert not answer.recommendation.cap.needed
    assert answer.recommendation.memory_bytes == rec.memory_bytes
    assert answer.recommendation.uncapped_peak_bytes == rec.memory_bytes


def test_estimate_a_description_file_and_a_whole_request(client):
    with open(os.path.join(REPO, "examples", "resnet50.json")) as f:
        description = json.load(f)
    from_dict = client.estimate(description, estimators=["horus"])
    assert [r.estimator_id for r in from_dict.results] == ["horus"]
    request = v1.EstimateRequest(estimators=["horus"])
    request.model.CopyFrom(json_format.ParseDict(description, v1.ModelDescription()))
    from_request = client.estimate(request)
    assert from_request.recommendation.memory_bytes == from_dict.recommendation.memory_bytes
    with pytest.raises(ValueError, match="gpu, estimators"):
        client.estimate(request, gpu="a100-40gb")
    with pytest.raises(TypeError, match="model"):
        client.estimate("resnet50.json")


def test_a_dict_is_prepared_once_and_again_when_it_changes(client):
    """The same dict, estimated again, is not parsed again (its request is kept); once
    changed, it is prepared anew: the answer follows the dict, never the kept copy."""
    with open(os.path.join(REPO, "examples", "resnet50.json")) as f:
        description = json.load(f)
    first = client.estimate(description, estimators=["horus"])
    parsed = []
    real_parse = json_format.ParseDict

    def counting_parse(*args, **kwargs):
        parsed.append(1)
        return real_parse(*args, **kwargs)

    gpuest_client = __import__("gpuest.client", fromlist=["json_format"])
    gpuest_client.json_format.ParseDict = counting_parse
    try:
        again = client.estimate(description, estimators=["horus"])
        assert parsed == []  # prepared once
        assert again.recommendation.memory_bytes == first.recommendation.memory_bytes
        # Another batch: without the trace, which answers for its own batch only.
        description["batchSize"] = int(description["batchSize"]) * 2
        del description["trace"]
        doubled = client.estimate(description, estimators=["horus"])
        assert parsed == [1]  # changed: prepared again
        assert doubled.recommendation.memory_bytes > first.recommendation.memory_bytes
        other_gpu = client.estimate(description, gpu="a100-40gb", estimators=["horus"])
        assert parsed == [1, 1]  # another request of the same dict
        assert other_gpu.recommendation.fit.gpu == "a100-40gb"
    finally:
        gpuest_client.json_format.ParseDict = real_parse


def test_list_estimators_and_health(client):
    listed = client.list_estimators()
    ids = {e.id for e in listed.estimators}
    assert {"horus", "allocsim", "analytic", "gpumemnet-cnn-mlp"} <= ids
    assert listed.models_version
    assert client.health() == "SERVING"
    assert client.health("gpuest.v1.Estimator") == "SERVING"


@pytest.mark.parametrize("edit, field", [
    (lambda r: setattr(r.model, "batch_size", 0), "model.batch_size"),
    (lambda r: setattr(r.model.layers[1], "type", ""), "model.layers[1].type"),
    (lambda r: setattr(r, "gpu", "no-such-gpu"), "gpu"),
    (lambda r: r.estimators.append("no-such-estimator"), "estimators[0]"),
])
def test_invalid_argument_names_the_field(client, edit, field):
    request = v1.EstimateRequest()
    request.model.CopyFrom(_mlp())
    edit(request)
    with pytest.raises(gpuest.GpuestError) as e:
        client.estimate(request)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.field == field, e.value.details
    assert e.value.method == "Estimate" and field in str(e.value)


def test_a_described_trace_answers_for_its_own_batch_only(client):
    """The describer records the batch it traced at; the client's request for another
    batch meets the server's one rule and is refused naming the field."""
    description = gpuest.describe(nn.Sequential(nn.Linear(64, 512), nn.ReLU()),
                                  input_shape=(64,), batch_size=32)
    assert description.trace.batch_size == 32
    assert client.estimate(description).recommendation.memory_bytes > 0
    description.batch_size = 64
    with pytest.raises(gpuest.GpuestError) as e:
        client.estimate(description)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.field == "model.trace.batch_size", e.value.details


def test_the_field_travels_as_a_google_rpc_bad_request(server):
    """The rich error details any gRPC client can read: a google.rpc.Status in the
    grpc-status-details-bin trailer, holding one google.rpc.BadRequest."""
    from gpuest import _rpc_pb2
    request = v1.EstimateRequest()
    request.model.CopyFrom(_mlp())
    request.model.layers[1].type = ""
    with grpc.insecure_channel(server.target) as channel:
        with pytest.raises(grpc.RpcError) as e:
            v1.EstimatorStub(channel).Estimate(request, timeout=10)
    trailer = dict(e.value.trailing_metadata())["grpc-status-details-bin"]
    status = _rpc_pb2.Status.FromString(trailer)
    assert status.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert status.message == e.value.details()
    (detail,) = status.details
    assert detail.type_url == "type.googleapis.com/google.rpc.BadRequest"
    (violation,) = _rpc_pb2.BadRequest.FromString(detail.value).field_violations
    assert violation.field == "model.layers[1].type"
    assert violation.description and violation.description in status.message


# The default deadline and retry policy (proto/gpuest/v1/client_policy.json, the C++
# client's too: tests/integration/server_test.cc checks the same two things).
def test_a_call_to_a_server_that_never_comes_fails_at_the_default_deadline():
    """It waits for the server until the deadline, not less, then says that no server
    was reachable and where it looked."""
    target = f"127.0.0.1:{_free_port()}"
    client = gpuest.Client(target)
    started = time.monotonic()
    with pytest.raises(gpuest.GpuestError) as e:
        client.estimate(_mlp())
    elapsed = time.monotonic() - started
    assert e.value.code == grpc.StatusCode.UNAVAILABLE and e.value.field is None
    assert f"no server was reachable at {target} before the deadline" in e.value.details
    deadline = gpuest.client.DEFAULT_TIMEOUT_S
    assert deadline - 0.005 <= elapsed < deadline + 2, elapsed
    client.close()


def test_a_call_outlasts_a_server_that_starts_half_a_second_later():
    port = _free_port()
    client = gpuest.Client(f"127.0.0.1:{port}")
    description = _mlp()
    outcome = {}

    def call():
        started = time.monotonic()
        try:
            outcome["response"] = client.estimate(description, estimators=["horus"])
        except gpuest.GpuestError as e:
            outcome["error"] = e
        outcome["took"] = time.monotonic() - started

    caller = threading.Thread(target=call)
    caller.start()
    time.sleep(0.5)  # the call finds nobody
    with ServerProcess(listen=f"127.0.0.1:{port}"):
        caller.join(timeout=30)
    assert "error" not in outcome, outcome
    assert outcome["response"].recommendation.memory_bytes > 0
    assert outcome["took"] < gpuest.client.DEFAULT_TIMEOUT_S, outcome["took"]
    client.close()


def _long_trace_request(temporaries):
    """A valid request whose replay takes tens of milliseconds (as the C++ tests'
    LongTracedStep): the weights, then short-lived temporaries one after another."""
    request = v1.EstimateRequest()
    request.model.CopyFrom(_mlp())
    trace = request.model.trace
    trace.Clear()
    trace.size_bytes.append(2**20)
    trace.alloc_at.append(1)
    trace.free_at.append(0)
    trace.category.append(v1.ALLOCATION_CATEGORY_PARAMETER)
    trace.size_bytes.extend(512 << (i % 18) for i in range(temporaries))
    trace.alloc_at.extend(2 + 2 * i for i in range(temporaries))
    trace.free_at.extend(3 + 2 * i for i in range(temporaries))
    trace.category.extend([v1.ALLOCATION_CATEGORY_TEMPORARY] * temporaries)
    return request


def test_a_slow_answer_stays_deadline_exceeded(client):
    """Connected, a call past its deadline is a slow answer, not an unreachable server."""
    client.list_estimators()
    with pytest.raises(gpuest.GpuestError) as e:
        client.estimate(_long_trace_request(200_000), timeout=0.001)
    assert e.value.code == grpc.StatusCode.DEADLINE_EXCEEDED, e.value
    assert client.health() == "SERVING"


def test_the_policy_file_is_read_strictly(tmp_path):
    from gpuest.client import _read_policy, policy_path
    with open(policy_path()) as f:
        policy = json.load(f)
    policy["reconnectBackoffMs"]["maximum"] = 1000
    path = tmp_path / "client_policy.json"
    path.write_text(json.dumps(policy))
    with pytest.raises(ValueError, match=r"'reconnectBackoffMs.maximum' is not a known key"):
        _read_policy(path)
    del policy["reconnectBackoffMs"]["maximum"]
    policy["defaultDeadlineSeconds"] = "5"
    path.write_text(json.dumps(policy))
    with pytest.raises(ValueError, match=r"'defaultDeadlineSeconds' must be a number"):
        _read_policy(path)


def _estimates_served(server):
    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics") as r:
        text = r.read().decode()
    return sum(float(m.group(1)) for m in re.finditer(
        r'^gpuest_requests_total\{[^}]*method="Estimate"[^}]*\} (\S+)$', text, re.M))


def test_round_robin_over_several_targets_and_past_a_dead_one():
    description = _mlp()
    with ServerProcess(metrics=True) as a, ServerProcess(metrics=True) as b:
        # round_robin spreads calls over the targets whose connection is up; on a busy
        # machine the second connects after the first calls (all 20 of a fixed number
        # once went to one server), so call until both have taken some, for 30 s at most.
        calls, give_up = 0, time.monotonic() + 30
        with gpuest.Client([a.target, b.target]) as client:
            while True:
                client.estimate(description, estimators=["horus"])
                calls += 1
                served = (_estimates_served(a), _estimates_served(b))
                if min(served) >= 2 or time.monotonic() > give_up:
                    break
        assert sum(served) == calls and min(served) >= 2, (calls, served)  # both take calls
        dead = f"127.0.0.1:{_free_port()}"
        with gpuest.Client(f"{dead},{a.target}") as client:
            for _ in range(5):
                client.estimate(description, estimators=["horus"], timeout=10)


def test_bad_client_arguments_name_the_argument():
    with pytest.raises(ValueError, match="targets"):
        gpuest.Client(["gpu-node-1:50051", "gpu-node-2:50051"])
    with pytest.raises(ValueError, match=r"targets\[1\]"):
        gpuest.Client(["127.0.0.1:1", ""])
    with pytest.raises(ValueError, match="timeout"):
        gpuest.Client("127.0.0.1:1", timeout=0)
    assert gpuest.Client("[::1]:1,[::1]:2").target == "ipv6:[::1]:1,[::1]:2"


def test_placement_calls_exist_exactly_when_their_module_was_generated():
    generated = os.path.exists(os.path.join(os.path.dirname(v1.__file__), "placement_pb2.py"))
    assert hasattr(gpuest.Client, "check_placement") == generated
    assert hasattr(gpuest.Client, "rank_gpus") == generated
