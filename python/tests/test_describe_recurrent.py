"""LSTM, GRU and RNN models are traced, with the memory cuDNN's training path holds.

cuDNN's reserve-space rule, in elements of the data type (see
gpuest/describe/recurrent.py for the source): directions x seq x batch x hidden x
(6 layers - 1) for LSTM, (7 layers - 1) for GRU, (2 layers - 1) for a plain RNN.
"""
import pytest
import torch
import torch.nn as nn

from helpers import bytes_by_category, check_trace_shape, live_curve, describe_dict

V, E, H, LAYERS = 50, 128, 256, 2
PER_LAYER = {nn.LSTM: 6, nn.GRU: 7, nn.RNN: 2}


def reserve_bytes(kind, seq, batch, layers=LAYERS, hidden=H, directions=1):
    return directions * seq * batch * hidden * (PER_LAYER[kind] * layers - 1) * 4


class RecurrentLM(nn.Module):
    """Embedding -> a 2-layer recurrent module -> logits over the vocabulary."""

    def __init__(self, kind=nn.LSTM, bidirectional=False):
        super().__init__()
        self.embed = nn.Embedding(V, E)
        self.rnn = kind(E, H, LAYERS, batch_first=True, bidirectional=bidirectional)
        self.head = nn.Linear(H * (2 if bidirectional else 1), V)

    def forward(self, x):
        return self.head(self.rnn(self.embed(x))[0])


def _trace(model, seq, batch):
    d = describe_dict(model, input_shape=(seq,), input_dtype="int64", batch_size=batch,
                      loss="cross_entropy", optimizer="sgd")
    assert "trace" in d, d.get("traceUnavailableReason")
    check_trace_shape(d["trace"])
    n_params = sum(p.numel() for p in model.parameters())
    assert bytes_by_category(d["trace"])["GRADIENT"] == n_params * 4
    return d["trace"]


def _activations(trace):
    return [int(s) for s, c in zip(trace["sizeBytes"], trace["category"])
            if c == "ALLOCATION_CATEGORY_ACTIVATION"]


@pytest.mark.parametrize("kind", [nn.LSTM, nn.GRU, nn.RNN], ids=lambda k: k.__name__)
def test_reserve_space_is_saved_and_scales_with_sequence_and_batch(kind):
    model = RecurrentLM(kind)
    base, longer, wider = _trace(model, 64, 8), _trace(model, 128, 8), _trace(model, 64, 16)
    assert reserve_bytes(kind, 64, 8) in _activations(base)
    assert reserve_bytes(kind, 128, 8) in _activations(longer)
    assert reserve_bytes(kind, 64, 16) in _activations(wider)
    act = lambda t: sum(_activations(t))
    # Everything saved grows with the tokens but the (layers, batch, hidden) initial
    # states, which grow with the batch alone.
    assert 1.95 < act(longer) / act(base) <= 2.0
    assert act(wider) / act(base) == pytest.approx(2.0, abs=0.001)


@pytest.mark.parametrize("kind", [nn.LSTM, nn.GRU], ids=lambda k: k.__name__)
def test_peak_is_the_reserve_space_and_cudnns_backward(kind):
    seq, batch = 256, 16
    model = RecurrentLM(kind)
    trace = _trace(model, seq, batch)
    weights = sum(p.numel() for p in model.parameters()) * 4
    out = seq * batch * H * 4          # the recurrent output, saved (and the head's input)
    x = seq * batch * E * 4            # the embedding output, saved as the input
    logits = seq * batch * V * 4       # held through backward
    # At the peak, in the recurrent backward: weights, the saved reserve, output and
    # input, the output's gradient and its (seq, batch)-ordered copy, the input's
    # copy and dx.
    expected = weights + reserve_bytes(kind, seq, batch) + out + x + logits + 2 * out + 2 * x
    peak = live_curve(trace)[1]
    assert abs(peak - expected) < 0.03 * expected, (peak, expected)
    assert reserve_bytes(kind, seq, batch) > 0.6 * peak  # the rule decides the answer


def test_bidirectional_reserve_counts_both_directions():
    trace = _trace(RecurrentLM(nn.LSTM, bidirectional=True), 32, 4)
    assert reserve_bytes(nn.LSTM, 32, 4, directions=2) in _activations(trace)


def test_the_module_is_left_as_it_was():
    model = RecurrentLM(nn.LSTM)
    before = list(model.rnn._flat_weights)
    _trace(model, 16, 2)
    assert all(a is b for a, b in zip(model.rnn._flat_weights, before))
    assert all(type(w) is nn.Parameter for w in model.rnn._flat_weights)
    assert model(torch.zeros(2, 16, dtype=torch.long)).shape == (2, 16, V)
    assert not hasattr(torch.nn.modules.rnn._VF, "_original")  # the real _VF is back


def test_describe_names_the_recurrent_layers():
    d = describe_dict(RecurrentLM(nn.GRU), input_shape=(32,), input_dtype="int64",
                      batch_size=4)
    gru = next(l for l in d["layers"] if l["type"] == "GRU")
    assert gru["outputActivations"] == 32 * H
    assert gru["parameters"] == sum(p.numel() for p in nn.GRU(E, H, LAYERS).parameters())
