"""Mixed precision is traced as CUDA autocast holds memory, against the fp32 trace of
the same model: fp32 master weights, 16-bit activations where CUDA casts (fp32 where
it does not), the 16-bit weight copies autocast caches for the forward, and the
GradScaler's state."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from helpers import bytes_by_category, check_trace_shape, describe_dict

B = 12


def _trace(model, shape, amp, **kwargs):
    kwargs.setdefault("optimizer", "sgd")
    d = describe_dict(model, input_shape=shape, batch_size=B, amp=amp, **kwargs)
    assert "trace" in d, d.get("traceUnavailableReason")
    check_trace_shape(d["trace"])
    assert d.get("mixedPrecision", False) is amp
    return d["trace"]


def _events(trace):
    return [(int(s), int(a), int(f), c.replace("ALLOCATION_CATEGORY_", ""))
            for s, a, f, c in zip(trace["sizeBytes"], trace["allocAt"], trace["freeAt"],
                                  trace["category"])]


def _first_gradient_at(trace):
    return min(a for _, a, _, c in _events(trace) if c == "GRADIENT")


def _backward_starts_at(trace):
    """Nothing saved for backward is freed before backward runs."""
    return min(f for _, _, f, c in _events(trace) if c == "ACTIVATION" and f)


def mlp():
    return nn.Sequential(nn.Linear(96, 160), nn.ReLU(), nn.Linear(160, 224), nn.GELU(),
                         nn.Linear(224, 10))


def convnet():
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                         nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))


def _weights(model, kinds=(nn.Linear, nn.Conv2d)):
    return [m.weight for m in model.modules() if isinstance(m, kinds)]


@pytest.mark.parametrize("make, shape, unsaved", [
    # The first Linear's input needs no gradient, so its backward needs no weight:
    # autograd keeps no copy of it. Convolution keeps its weight either way.
    (mlp, (96,), 1), (convnet, (3, 32, 32), 0)], ids=["mlp", "convnet"])
def test_activations_are_half_and_the_weights_stay_fp32(make, shape, unsaved):
    model = make()
    fp32, amp = _trace(model, shape, False), _trace(model, shape, True)
    n_params = sum(p.numel() for p in model.parameters())
    state = n_params * 4 + sum(b.numel() * b.element_size() for b in model.buffers())
    assert bytes_by_category(amp)["PARAMETER"] == bytes_by_category(fp32)["PARAMETER"] == state
    assert bytes_by_category(amp)["GRADIENT"] == n_params * 4  # fp32 master gradients
    # Saved for backward under autocast: every fp32 activation at half its bytes, the
    # fp16 copies of the weights autograd keeps, and the fp16 copy of the input batch
    # (the first layer saves that copy; in fp32 it saves the batch itself, an INPUT).
    copies = 2 * sum(w.numel() for w in _weights(model)[unsaved:])
    batch_copy = 2 * B * torch.Size(shape).numel()
    expected = bytes_by_category(fp32)["ACTIVATION"] / 2 + copies + batch_copy
    assert bytes_by_category(amp)["ACTIVATION"] == pytest.approx(expected, rel=0.01)


def test_weight_copies_are_cached_for_the_forward():
    model = mlp()
    trace = _trace(model, (96,), True)
    backward = _backward_starts_at(trace)
    for i, w in enumerate(_weights(model)):
        # (Backward makes fp16 weight gradients of the same size, cast to fp32 after.)
        copies = [e for e in _events(trace) if e[0] == 2 * w.numel() and e[1] < backward]
        assert len(copies) == 1, (i, copies)  # one fp16 copy per weight
        size, alloc, free, _ = copies[0]
        assert alloc < backward  # made in the forward
        if i == 0:  # not saved: dropped when the autocast region exits
            assert 0 < free < backward
        else:       # saved for backward: alive into it
            assert free > backward


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(72, 72)
        self.out = nn.Linear(72, 5)

    def forward(self, x):
        return self.out(self.fc(torch.relu(self.fc(x))))


def test_a_weight_used_twice_is_cast_once():
    trace = _trace(Tied(), (72,), True)
    backward = _backward_starts_at(trace)
    assert [s for s, a, _, _ in _events(trace) if a < backward].count(2 * 72 * 72) == 1


class Block(nn.Module):
    """A transformer-ish block: CUDA autocast runs layer_norm and softmax in fp32
    (CPU autocast would keep both in 16 bits) and casts einsum to fp16 (CPU would not)."""

    def __init__(self, dim=48, heads=4):
        super().__init__()
        self.embed = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.mix = nn.Parameter(torch.randn(dim, dim))
        self.head = nn.Linear(dim, 3)
        self.heads = heads

    def forward(self, x):                      # x: (B, L, dim)
        h = self.norm(self.embed(x))
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        scores = torch.einsum("bld,bmd->blm", q, k)
        attn = F.softmax(scores, dim=-1)
        y = torch.einsum("blm,bmd->bld", attn.to(v.dtype), v)
        y = torch.einsum("bld,de->ble", y, self.mix)
        return self.head(y.mean(dim=1))


def test_cuda_op_lists_not_cpu_autocasts():
    L, dim = 40, 48
    trace = _trace(Block(dim), (L, dim), True)
    saved = [s for s, _, _, c in _events(trace) if c == "ACTIVATION"]
    sizes = [s for s, _, _, _ in _events(trace)]
    assert B * L * dim * 4 in saved       # layer_norm's fp32 copy of its fp16 input
    assert B * L * L * 4 in saved         # softmax's fp32 output (saved by its backward)
    assert B * L * L * 2 in saved         # its fp16 cast, saved by the second einsum
    assert 2 * dim * dim in sizes         # einsum cast the parameter to fp16
    assert B * L * dim * 2 in saved       # einsum's fp16 output


def test_binary_cross_entropy_is_refused_as_cuda_autocast_does():
    model = nn.Sequential(nn.Linear(8, 1), nn.Sigmoid())
    step = lambda m, x: F.binary_cross_entropy(m(x), torch.zeros(x.shape[0], 1))
    d = describe_dict(model, input_shape=(8,), batch_size=4, amp=True, step=step)
    assert "trace" not in d and "unsafe to autocast" in d["traceUnavailableReason"]
    d = describe_dict(model, input_shape=(8,), batch_size=4, step=step)
    assert "trace" in d


def test_grad_scaler_state():
    model = mlp()
    fp32, amp = _trace(model, (96,), False, optimizer="adam"), _trace(model, (96,), True,
                                                                      optimizer="adam")
    # The scale (fp32) and the growth tracker (int32), kept across steps.
    assert (bytes_by_category(amp)["OPTIMIZER_STATE"]
            == bytes_by_category(fp32)["OPTIMIZER_STATE"] + 4 + 4)
    # unscale_: the scale in float64 and its reciprocal, the fp32 inverse scale and the
    # found-inf flag, after backward and gone by the end of the step.
    after = [(s, f) for s, a, f, c in _events(amp) if a > _first_gradient_at(amp) and s <= 8]
    assert sorted(s for s, _ in after) == [4, 4, 8, 8] and all(f > 0 for _, f in after)


def test_lstm_under_autocast():
    seq, hidden, layers = 24, 32, 2
    model = nn.LSTM(16, hidden, layers, batch_first=True)
    trace = _trace(model, (seq, 16), True, loss="mean")
    saved = [s for s, _, _, c in _events(trace) if c == "ACTIVATION"]
    assert B * seq * hidden * (6 * layers - 1) * 2 in saved  # the reserve, in fp16
    n_params = sum(p.numel() for p in model.parameters())
    assert 2 * n_params in saved  # the fp16 flat weight buffer cuDNN runs on
    assert bytes_by_category(trace)["GRADIENT"] == 4 * n_params


def test_cpu_autocast_is_left_as_it_was():
    x, w = torch.randn(4, 8), torch.randn(16, 8, requires_grad=True)

    def cpu_autocast_dtypes():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = F.linear(x, w)
            return y.dtype, F.softmax(y, -1).dtype

    before = cpu_autocast_dtypes()
    for _ in range(2):  # the kernels come and go with each describe
        _trace(mlp(), (96,), True)
    assert cpu_autocast_dtypes() == before == (torch.bfloat16, torch.bfloat16)
