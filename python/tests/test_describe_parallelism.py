"""A job over several GPUs (issue "llm"): the description records the layout and the
largest unit sharding gathers, and the server's estimate is per GPU, checked against
the ZeRO paper's accounting of what each stage divides."""
import pytest

import gpuest
from gpuest import v1
from gpuest.describe import DescribeError
from helpers import describe_dict
from server_process import ServerProcess

from small_decoder import Block, Decoder

SEQ = 32


def _describe(parallelism=None):
    return describe_dict(Decoder(), input_shape=(SEQ,), input_dtype="int64", batch_size=4,
                         optimizer="adamw", loss="cross_entropy", parallelism=parallelism)


def test_the_description_records_the_layout_and_measures_the_largest_block():
    d = _describe({"data_parallel": 8, "sharding": "zero3"})
    block = sum(p.numel() for p in Block().parameters()) * 4
    assert d["parallelism"] == {"dataParallel": 8, "sharding": "SHARDING_PARAMETERS",
                                "largestUnitBytes": block}
    assert "parallelism" not in _describe()


def test_a_bad_layout_is_refused_naming_the_key():
    with pytest.raises(DescribeError, match="sharding"):
        _describe({"data_parallel": 8, "sharding": "zero9"})
    with pytest.raises(DescribeError, match="unknown keys"):
        _describe({"world_size": 8})
    with pytest.raises(DescribeError, match="data_parallel"):
        _describe({"data_parallel": -1})


@pytest.fixture(scope="module")
def client():
    with ServerProcess() as server, gpuest.Client(server.target) as c:
        yield c


def _allocated(client, parallelism):
    response = client.estimate(_describe(parallelism), gpu="a100-40gb",
                               estimators=["allocsim"])
    (result,) = response.results
    return result.memory.allocated_peak_bytes, result.basis


def test_each_zero_stage_lowers_the_per_gpu_peak_and_the_basis_says_why(client):
    params = sum(p.numel() for p in Decoder().parameters())
    one, _ = _allocated(client, None)
    ddp, ddp_basis = _allocated(client, {"data_parallel": 8})
    zero1, _ = _allocated(client, {"data_parallel": 8, "sharding": "zero1"})
    zero3, zero3_basis = _allocated(client, {"data_parallel": 8, "sharding": "zero3"})
    # DDP's buckets: a second copy of the fp32 gradients (4 bytes a parameter), at most.
    assert one < ddp <= one + 4 * params + (1 << 20)
    assert "DDP over 8 GPUs" in ddp_basis
    # ZeRO-1 divides AdamW's two fp32 states (8 bytes a parameter) by 8, and the update's
    # temporaries with them (the multi-tensor step's, at most two fp32 copies): the peak
    # drops by up to 7/8 of those 16 bytes a parameter.
    assert zero1 < one
    assert one - zero1 <= 16 * params * 7 // 8 + (1 << 20)
    assert zero3 < zero1
    assert "ZeRO-3" in zero3_basis and "all-gathered" in zero3_basis


def test_rank_gpus_and_check_placement_take_a_job_over_eight_gpus(client):
    job = gpuest.describe(Decoder(), input_shape=(SEQ,), input_dtype="int64", batch_size=4,
                          optimizer="adamw", loss="cross_entropy",
                          parallelism={"data_parallel": 8, "sharding": "zero3"})
    described = v1.PlacementJob(description=v1.EstimateRequest(model=job))
    ranking = client.rank_gpus(v1.RankGpusRequest(job=described))
    assert ranking.gpus_needed == 8
    (a100,) = [g for g in ranking.gpus if g.gpu == "a100-40gb"]
    allocated, _ = _allocated(client, {"data_parallel": 8, "sharding": "zero3"})
    assert a100.peak_bytes > allocated  # the rank's requirement: its step and context
    placed = client.check_placement(v1.CheckPlacementRequest(
        gpu=v1.PlacementGpu(catalog_id="a100-40gb"), candidate=described))
    assert placed.candidate_gpus == 8
    assert placed.candidate_bytes == a100.peak_bytes
    assert any("runs on 8 GPUs" in r for r in placed.reasons)
