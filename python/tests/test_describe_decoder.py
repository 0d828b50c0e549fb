"""A small decoder as language-model jobs train it (issue "llm"): built on the CPU or on
the meta device, the same trace; the server's breakdown puts its memory where it is;
activation checkpointing keeps only each block's input."""
import pytest
import torch

import gpuest
from helpers import bytes_by_category, describe_dict, live_curve
from server_process import ServerProcess

from small_decoder import LAYERS, VOCAB, WIDTH, Decoder

B, T = 8, 256


PARAMS = sum(p.numel() for p in Decoder().parameters())


def _describe(model, **kwargs):
    kwargs.setdefault("optimizer", "adamw")
    d = describe_dict(model, input_shape=(T,), input_dtype="int64", batch_size=B,
                      loss="cross_entropy", **kwargs)
    assert "trace" in d, d.get("traceUnavailableReason")
    return d


def test_built_on_the_cpu_or_on_the_meta_device_the_same_trace():
    torch.manual_seed(0)
    on_cpu = _describe(Decoder())
    on_meta = _describe(Decoder().to("meta"))
    assert on_meta["trace"]["sizeBytes"] == on_cpu["trace"]["sizeBytes"]
    assert on_meta["trace"]["category"] == on_cpu["trace"]["category"]


def test_the_breakdown_puts_each_part_where_it_is():
    model = gpuest.describe(Decoder().to("meta"), input_shape=(T,), input_dtype="int64",
                            batch_size=B, optimizer="adamw", loss="cross_entropy")
    with ServerProcess() as server, gpuest.Client(server.target) as client:
        response = client.estimate(model, gpu="a100-40gb", estimators=["allocsim"])
    (result,) = response.results
    b = result.memory.breakdown
    # At the peak every fp32 weight is live, and the batch's tokens.
    assert b.weights_bytes == pytest.approx(4 * PARAMS, rel=0.01)
    assert b.inputs_bytes >= B * T * 8
    # The simulation replays two steps; here the peak is the second step's end of
    # forward: AdamW's two states per weight (made in the first step), the saved
    # activations, and no gradients (zero_grad set them to None).
    assert b.optimizer_state_bytes == pytest.approx(8 * PARAMS, rel=0.01)
    assert b.activations_bytes > 4 * PARAMS
    assert b.gradients_bytes == 0
    allocated = result.memory.allocated_peak_bytes
    parts = (b.weights_bytes + b.gradients_bytes + b.optimizer_state_bytes + b.inputs_bytes
             + b.activations_bytes + b.temporaries_bytes)
    assert parts <= allocated


@pytest.mark.parametrize("how", ["reentrant", "non_reentrant"])
def test_activation_checkpointing_keeps_only_each_blocks_input(how):
    plain = _describe(Decoder())
    ckpt = _describe(Decoder(checkpointing=how))
    saved_plain = bytes_by_category(plain["trace"])["ACTIVATION"]
    saved_ckpt = bytes_by_category(ckpt["trace"])["ACTIVATION"]
    block_input = B * T * WIDTH * 4
    logits = B * T * VOCAB * 4
    # Without: per block the norm's input and output and ReLU's output (4 x WIDTH
    # wide). With: each block's input (for its recomputation), and the head's input and
    # the loss's log-softmax as before.
    assert saved_plain - saved_ckpt >= LAYERS * 5 * block_input
    assert saved_ckpt <= LAYERS * block_input + 2 * logits + 4 * block_input
    assert live_curve(ckpt["trace"])[1] < live_curve(plain["trace"])[1]


def test_the_layer_sequence_is_one_forward_whatever_the_step_repeats():
    plain = _describe(Decoder())["layers"]
    for variant in (_describe(Decoder(checkpointing="non_reentrant")),
                    _describe(Decoder(checkpointing="reentrant")),
                    _describe(Decoder(), gradient_accumulation=4)):
        assert variant["layers"] == plain
