"""describe returns a gpuest.v1.ModelDescription, and its JSON form is exactly protobuf's
JSON mapping of it.

The generated gpuest.v1 is the build's (build/python, what the wheel carries too),
imported beside the package's sources: the package's own `gpuest` does not hide it.
The JSON form is parsed strictly: an unknown key, a wrong enum name or a wrong type
fails.
"""
import os

import pytest
import torch.nn as nn
from google.protobuf import json_format

import gpuest
from gpuest import v1
from gpuest.describe import DescribeError, message
from gpuest.describe.api import describe_json


def _small():
    return nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.GELU(), nn.Dropout(0.1),
                         nn.Linear(16, 3))


def test_the_generated_package_is_found_beside_the_sources():
    assert v1.ModelDescription is v1.model_pb2.ModelDescription
    # The checkout's python/gpuest has no v1: it is the build's, on the package's path.
    assert not os.path.exists(os.path.join(os.path.dirname(gpuest.__file__), "v1"))
    assert os.path.realpath(os.path.dirname(os.path.dirname(v1.__file__))) in \
        [os.path.realpath(p) for p in gpuest.__path__]
    assert v1.EstimatorStub.__name__ == "EstimatorStub"


@pytest.mark.parametrize("kwargs", [dict(), dict(trace=False), dict(optimizer="sgd", amp=True),
                                    dict(loss="mse", cudnn_benchmark=False)])
def test_message_and_json_form_agree(kwargs):
    msg = gpuest.describe(_small(), input_shape=(8,), batch_size=4, **kwargs)
    assert type(msg) is v1.ModelDescription
    d = describe_json(_small(), input_shape=(8,), batch_size=4, **kwargs)
    assert gpuest.as_json_dict(msg) == d  # 64-bit integers as numbers, as describe wrote
    assert json_format.ParseDict(d, v1.ModelDescription()) == msg  # strict parse
    assert json_format.Parse(json_format.MessageToJson(msg), v1.ModelDescription()) == msg
    assert msg.family == v1.MODEL_FAMILY_MLP
    assert len(msg.layers) == 5 and msg.layers[0].type == "Linear"
    if kwargs.get("trace", True):
        t = msg.trace
        assert len(t.size_bytes) == len(t.alloc_at) == len(t.free_at) == len(t.category) > 0
        assert set(t.category) <= {v1.ALLOCATION_CATEGORY_PARAMETER + i for i in range(6)}
    else:
        assert not msg.HasField("trace") and msg.trace_unavailable_reason


def test_a_key_outside_the_schema_is_refused():
    d = describe_json(_small(), input_shape=(8,), batch_size=4, trace=False)
    d["batchSzie"] = 4
    with pytest.raises(json_format.ParseError, match="batchSzie"):
        message.to_message(d)


def test_the_jobs_allocator_settings_reach_the_description(monkeypatch):
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF",
                       "garbage_collection_threshold:0.6,max_split_size_mb:128")
    d = describe_json(_small(), input_shape=(8,), batch_size=4, trace=False)
    msg = json_format.ParseDict(d, v1.ModelDescription())
    assert msg.allocator.max_split_size_mb == 128 and not msg.allocator.expandable_segments
    d = describe_json(_small(), input_shape=(8,), batch_size=4, trace=False,
                      alloc_conf="expandable_segments:True")
    msg = json_format.ParseDict(d, v1.ModelDescription())
    assert msg.allocator.expandable_segments and msg.allocator.max_split_size_mb == 0
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF")
    assert "allocator" not in describe_json(_small(), input_shape=(8,), batch_size=4,
                                            trace=False)
    with pytest.raises(DescribeError, match="max_split_size_mb"):
        describe_json(_small(), input_shape=(8,), batch_size=4, trace=False,
                      alloc_conf="max_split_size_mb:8")


def test_loss_and_cudnn_benchmark_are_recorded(monkeypatch):
    import torch
    parse = lambda d: json_format.ParseDict(d, v1.ModelDescription())
    msg = parse(describe_json(_small(), input_shape=(8,), batch_size=4, loss="mse"))
    assert msg.loss == "mse"
    # The job's cudnn.benchmark: on if this process turned it on; PyTorch's default
    # (off) is not an answer, since the training script may still turn it on, so it is
    # not recorded; an explicit false is recorded, distinct from "not recorded".
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", True)
    d = describe_json(_small(), input_shape=(8,), batch_size=4, trace=False)
    assert d["cudnnBenchmark"] is True and parse(d).cudnn_benchmark
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", False)
    d = describe_json(_small(), input_shape=(8,), batch_size=4, trace=False)
    assert "cudnnBenchmark" not in d and not parse(d).HasField("cudnn_benchmark")
    d = describe_json(_small(), input_shape=(8,), batch_size=4, trace=False,
                      cudnn_benchmark=False)
    assert d["cudnnBenchmark"] is False
    msg = parse(d)
    assert msg.HasField("cudnn_benchmark") and not msg.cudnn_benchmark
    d = describe_json(_small(), input_shape=(8,), batch_size=4, trace=False,
                      cudnn_benchmark=True)
    assert d["cudnnBenchmark"] is True
    assert not v1.ModelDescription().HasField("cudnn_benchmark")  # unset: not recorded
    with pytest.raises(DescribeError, match="cudnn_benchmark"):
        describe_json(_small(), input_shape=(8,), batch_size=4, cudnn_benchmark="yes")
