"""describe holds the process while it traces: one TraceSession (session.py) owns the
fake mode, the model's hooks and every process-wide emulation it patches in (the
fused-attention, recurrent and autocast ones), under a lock. Calls from several threads
at once, or one after another, must each get the answer they get alone, and leave every
patched function as it was, also when the trace raises."""
import threading

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.modules.rnn as rnn_module

from gpuest.describe import fused_attention
from gpuest.describe.cuda_autocast import _cpu_autocast_enabled
from gpuest.describe.session import TraceSession
from helpers import describe_dict


@pytest.fixture(autouse=True, scope="module")
def torch2_attention():
    """F.scaled_dot_product_attention on torch 1.13 too (the package's), so that its
    swap is checked on either version."""
    installed = fused_attention.provide_torch2_attention()
    yield
    if installed:
        del F.scaled_dot_product_attention


def _process_state():
    """Everything describe patches in the process, as it is now."""
    kernels = sorted(torch._C._dispatch_get_registrations_for_dispatch_key("AutocastCPU"))
    return {"F.multi_head_attention_forward": F.multi_head_attention_forward,
            "F.scaled_dot_product_attention": F.scaled_dot_product_attention,
            "rnn._VF": rnn_module._VF,
            "AutocastCPU kernels": {n: torch._C._dispatch_dump(n) for n in kernels},
            "CPU autocast on": _cpu_autocast_enabled()}


def _another_thread_can_describe():
    done = []
    t = threading.Thread(target=lambda: done.append(describe_dict(
        nn.Linear(4, 4), input_shape=(4,), batch_size=2)))
    t.start()
    t.join(timeout=120)
    return bool(done)


class Everything(nn.Module):
    """Every emulation at once: F.scaled_dot_product_attention, nn.MultiheadAttention
    (through the encoder layer) and an LSTM; with ``fail``, a ValueError saying it
    after all of them ran."""

    def __init__(self, fail=None):
        super().__init__()
        self.qkv = nn.Linear(32, 96)
        self.encoder = nn.TransformerEncoderLayer(32, 4, batch_first=True)
        self.rnn = nn.LSTM(32, 16, batch_first=True)
        self.head = nn.Linear(16, 4)
        self.fail = fail

    def forward(self, x):
        batch, length, _ = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, 4, 8).permute(2, 0, 3, 1, 4)
        x = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(batch, length, 32)
        x = self.head(self.rnn(self.encoder(x))[0])
        if self.fail is not None:
            raise ValueError(self.fail)
        return x


def _mlp():
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))


def _encoder():
    return nn.TransformerEncoder(
        nn.TransformerEncoderLayer(d_model=32, nhead=4, batch_first=True), num_layers=2)


def _lstm():
    return nn.LSTM(16, 32, batch_first=True)


def _raising():
    return Everything(fail="raised mid-trace")


JOBS = [
    (_mlp, dict(input_shape=(32,), batch_size=8)),
    (_encoder, dict(input_shape=(12, 32), batch_size=4, amp=True)),
    (_lstm, dict(input_shape=(10, 16), batch_size=4, loss="mean")),
    (Everything, dict(input_shape=(12, 32), batch_size=4, amp=True, loss="mean")),
    (_raising, dict(input_shape=(12, 32), batch_size=4, amp=True, loss="mean")),
]
IDS = ["mlp", "encoder-amp", "lstm", "everything-amp", "raising-amp"]


@pytest.mark.parametrize("make, kwargs", JOBS, ids=IDS)
def test_describing_twice_gives_the_same_answer_and_leaves_the_process_as_it_was(
        make, kwargs):
    before = _process_state()
    model = make()
    first = describe_dict(model, **kwargs)
    assert _process_state() == before
    assert describe_dict(model, **kwargs) == first
    assert _process_state() == before


def test_a_forward_that_raises_is_reported_and_every_patch_is_undone():
    before = _process_state()
    d = describe_dict(_raising(), input_shape=(12, 32), batch_size=4, amp=True)
    assert "trace" not in d
    assert d["traceUnavailableReason"].startswith("ValueError: raised mid-trace")
    assert _process_state() == before


class _Escape(BaseException):
    """Not an Exception: describe does not catch it, so it leaves the session."""


def test_an_exception_that_escapes_describe_undoes_every_patch_and_frees_the_lock():
    before = _process_state()
    model = Everything()

    def step(m, batch):
        m(batch)
        raise _Escape()

    with pytest.raises(_Escape):
        describe_dict(model, input_shape=(12, 32), batch_size=4, amp=True, step=step)
    assert _process_state() == before
    assert all(type(p) is nn.Parameter for p in model.parameters())
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())
    assert _another_thread_can_describe()


def test_a_session_patches_only_inside_its_run_and_puts_everything_back():
    before = _process_state()
    model = Everything()
    with pytest.raises(ValueError, match="inside"):
        with TraceSession(model, 4, torch.float16) as session:
            with session.fake_run(torch.float32):
                with session.emulating(), session.autocast_region():
                    inside = _process_state()
                    raise ValueError("inside")
    # Each entry was swapped for the run (the check above can fail), and is back.
    assert all(inside[k] != before[k] for k in before)
    assert _process_state() == before
    assert session.mode is None and model.training
    assert all(type(p) is nn.Parameter for p in model.parameters())
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())
    assert _another_thread_can_describe()


def test_describing_from_threads_gives_each_call_its_answer_alone():
    before = _process_state()
    alone = [describe_dict(make(), **kwargs) for make, kwargs in JOBS]
    results = {}
    errors = []

    def run(k, i):
        make, kwargs = JOBS[i]
        try:
            results[(k, i)] = describe_dict(make(), **kwargs)
        except Exception as e:  # reported below, with the job
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=run, args=(k, i)) for k in range(3)
               for i in range(len(JOBS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 3 * len(JOBS)
    for (k, i), d in results.items():
        assert d == alone[i], (k, IDS[i])
    assert _process_state() == before


def test_the_step_hands_on_a_trace_nothing_can_change():
    import dataclasses

    from gpuest.describe import api
    from gpuest.describe.tracer import Trace
    seen = []
    original = api.traced_step

    def keep(*args, **kwargs):
        seen.append(original(*args, **kwargs))
        return seen[-1]

    api.traced_step = keep
    try:
        api.describe_json(nn.Linear(8, 8), input_shape=(8,), batch_size=2)
    finally:
        api.traced_step = original
    (trace,) = seen
    assert isinstance(trace, Trace) and isinstance(trace.sizes, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        trace.loss = "changed"  # type: ignore[misc]
