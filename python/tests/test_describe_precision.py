"""Precision as language-model jobs run it (issue "llm"), each against a count by hand:
"true" bfloat16 (weights, gradients and AdamW's state in bfloat16), and autocast in
float16 (a GradScaler) or bfloat16 (none) over float32 master weights."""
import pytest
import torch.nn as nn

from helpers import bytes_by_category, describe_dict

B, WIDTH = 16, 256


def _model():
    return nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))


PARAMS = sum(p.numel() for p in _model().parameters())


def _describe(**kwargs):
    d = describe_dict(_model(), input_shape=(WIDTH,), batch_size=B, optimizer="adamw",
                      loss="mean", **kwargs)
    assert "trace" in d, d.get("traceUnavailableReason")
    return d


def test_true_bfloat16_keeps_weights_gradients_and_adamw_state_in_two_bytes():
    by_cat = bytes_by_category(_describe(dtype="bfloat16")["trace"])
    assert by_cat["PARAMETER"] == 2 * PARAMS
    assert by_cat["GRADIENT"] == 2 * PARAMS
    # exp_avg and exp_avg_sq in the parameter's dtype, and a step count per tensor.
    assert 4 * PARAMS <= by_cat["OPTIMIZER_STATE"] < 4 * PARAMS + 1024


@pytest.mark.parametrize("amp", [True, "float16", "bfloat16"])
def test_autocast_keeps_float32_masters(amp):
    d = _describe(amp=amp)
    assert d["mixedPrecision"] is True
    by_cat = bytes_by_category(d["trace"])
    assert by_cat["PARAMETER"] == 4 * PARAMS
    assert by_cat["GRADIENT"] == 4 * PARAMS
    assert 8 * PARAMS <= by_cat["OPTIMIZER_STATE"] < 8 * PARAMS + 1024


def test_only_float16_autocast_keeps_a_grad_scaler():
    fp16, bf16 = _describe(amp="float16"), _describe(amp="bfloat16")
    state = [bytes_by_category(d["trace"])["OPTIMIZER_STATE"] for d in (fp16, bf16)]
    # GradScaler's (1,) float32 scale and (1,) int32 growth tracker.
    assert state[0] - state[1] == 4 + 4
    assert "float16) and GradScaler" in fp16["trace"]["tracer"]
    assert "bfloat16, no GradScaler" in bf16["trace"]["tracer"]


def test_float16_and_bfloat16_autocast_save_the_same_activation_bytes():
    fp16 = bytes_by_category(_describe(amp="float16")["trace"])
    bf16 = bytes_by_category(_describe(amp="bfloat16")["trace"])
    assert fp16["ACTIVATION"] == bf16["ACTIVATION"] > 0


def test_an_unknown_autocast_type_is_refused():
    from gpuest.describe import DescribeError
    with pytest.raises(DescribeError, match="amp must be"):
        _describe(amp="float8")
