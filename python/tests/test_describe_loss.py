"""The traced step computes the loss the job trains with, and the description names it."""
import json

import pytest
import torch.nn as nn
import torch.nn.functional as F

import gpuest
from gpuest.describe import DescribeError
from gpuest.describe.__main__ import main
from helpers import bytes_by_category, check_trace_shape, live_curve, describe_dict

B, T, V, D = 4, 128, 32000, 64
LOGITS = B * T * V * 4          # one fp32 (batch, seq, vocab) tensor
HEAD_GRADS = (V * D + V) * 4    # the output layer's weight and bias gradients


class TinyLM(nn.Module):
    """Token ids -> embedding -> logits over the vocabulary."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(V, D)
        self.head = nn.Linear(D, V)

    def forward(self, x):
        return self.head(self.embed(x))


def _describe(model=None, **kwargs):
    kwargs.setdefault("optimizer", "sgd")
    d = describe_dict(model or TinyLM(), input_shape=(T,), input_dtype="int64",
                      batch_size=B, **kwargs)
    assert "trace" in d, d.get("traceUnavailableReason")
    check_trace_shape(d["trace"])
    return d


def test_cross_entropy_over_the_vocabulary_is_counted():
    mean, ce = _describe(loss="mean"), _describe(loss="cross_entropy")
    assert mean["loss"] == "mean" and ce["loss"] == "cross_entropy"
    # The mean loss's peak (in backward): the logits and their gradient, with the
    # head's weight gradient. Cross-entropy's: the logits, the log-softmax saved for
    # backward, nll_loss's gradient and log_softmax's gradient, before the head's
    # gradients exist. So two more logits-sized tensors, less the head's gradients.
    expected = 2 * LOGITS - HEAD_GRADS
    diff = live_curve(ce["trace"])[1] - live_curve(mean["trace"])[1]
    assert abs(diff - expected) < 0.01 * LOGITS, (diff, expected)
    # The (batch, seq) int64 targets are part of the batch.
    assert bytes_by_category(ce["trace"])["INPUT"] == B * T * 8 + B * T * 8
    assert bytes_by_category(mean["trace"])["INPUT"] == B * T * 8


def test_auto_keeps_the_old_step_and_says_which_loss_it_traced():
    lm = _describe()
    assert lm["loss"] == "mean"
    assert bytes_by_category(lm["trace"])["INPUT"] == B * T * 8 + B * 8  # tokens, labels
    classifier = describe_dict(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 5)),
                               input_shape=(8,), batch_size=4)
    assert classifier["loss"] == "cross_entropy"


def test_mse_target_is_shaped_like_the_output():
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 6))
    d = describe_dict(model, input_shape=(8,), batch_size=16, loss="mse")
    assert d["loss"] == "mse"
    assert bytes_by_category(d["trace"])["INPUT"] == 16 * 8 * 4 + 16 * 6 * 4


def test_dense_cross_entropy_takes_classes_on_dim_1():
    model = nn.Conv2d(3, 5, 3, padding=1)
    d = describe_dict(model, input_shape=(3, 16, 16), batch_size=2, loss="cross_entropy")
    assert d["loss"] == "cross_entropy"
    assert bytes_by_category(d["trace"])["INPUT"] == 2 * 3 * 16 * 16 * 4 + 2 * 16 * 16 * 8


def test_a_step_function_runs_the_callers_loss():
    seen = {}

    def step(model, batch):
        seen["batch"] = tuple(batch.shape)
        logits = model(batch[:, :-1])  # next-token prediction on shifted ids
        return F.cross_entropy(logits.reshape(-1, V), batch[:, 1:].reshape(-1))

    d = _describe(step=step)
    assert d["loss"] == "step_function" and seen["batch"] == (B, T)
    mean = _describe(loss="mean")
    # Only the loss comes back, so the logits die in the step; its peak holds the
    # log-softmax saved for backward and the two gradients of its backward, three
    # (batch, seq - 1, vocab) tensors, against the mean loss's two logits-sized
    # tensors and the head's gradients.
    expected = 3 * B * (T - 1) * V * 4 - 2 * LOGITS - HEAD_GRADS
    diff = live_curve(d["trace"])[1] - live_curve(mean["trace"])[1]
    assert abs(diff - expected) < 0.01 * LOGITS, (diff, expected)


def test_a_step_function_that_returns_no_loss_says_so():
    d = describe_dict(TinyLM(), input_shape=(T,), input_dtype="int64", batch_size=B,
                      step=lambda model, batch: model(batch))
    assert "trace" not in d and d["loss"] == "step_function"
    assert "step function must return the scalar loss" in d["traceUnavailableReason"]
    assert d["layers"]


@pytest.mark.parametrize("kwargs, says", [
    (dict(loss="nll"), "unknown loss"),
    (dict(loss="mse", step=lambda m, b: m(b).sum()), "not both"),
    (dict(step="cross_entropy"), "step must be a function"),
])
def test_bad_loss_arguments(kwargs, says):
    with pytest.raises(DescribeError, match=says):
        describe_dict(TinyLM(), input_shape=(T,), input_dtype="int64", batch_size=B,
                      **kwargs)


def test_cli_loss(capsys):
    assert main(["--model", "torch.nn:Linear", "--kwargs",
                 '{"in_features": 4, "out_features": 3}', "--input-shape", "4",
                 "--batch-size", "2", "--loss", "mse"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["loss"] == "mse"
    assert bytes_by_category(d["trace"])["INPUT"] == 2 * 4 * 4 + 2 * 3 * 4
    with pytest.raises(SystemExit) as e:
        main(["--model", "torch.nn:Linear", "--kwargs", '{"in_features": 4, "out_features": 3}',
              "--input-shape", "4", "--batch-size", "2", "--loss", "hinge"])
    assert e.value.code == 2 and "invalid choice" in capsys.readouterr().err


def test_a_chunked_cross_entropy_step_never_holds_the_whole_logits():
    """Large-vocabulary recipes (Liger's fused linear cross-entropy, torchtune's chunked
    loss) compute the head and the loss a chunk of tokens at a time, recomputing each
    chunk's logits in backward: the (batch, seq, vocab) logits never exist at once."""
    import torch.utils.checkpoint as checkpoint
    chunks = 8

    def chunk_loss(head, hidden, targets):
        logits = head(hidden).float()
        return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), reduction="sum")

    def chunked_step(model, tokens):
        hidden = model.embed(tokens)
        total = 0
        for h, t in zip(hidden.chunk(chunks, dim=1), tokens.chunk(chunks, dim=1)):
            total = total + checkpoint.checkpoint(chunk_loss, model.head, h, t,
                                                  use_reentrant=False)
        return total / tokens.numel()

    def full_step(model, tokens):
        return F.cross_entropy(model(tokens).reshape(-1, V), tokens.reshape(-1))

    full = live_curve(_describe(step=full_step)["trace"])[1]
    chunked = live_curve(_describe(step=chunked_step)["trace"])[1]
    # The whole step's logits-sized tensors (about three at once) shrink to a chunk's.
    assert full - chunked > 2 * LOGITS * (1 - 2 / chunks), (full, chunked)
