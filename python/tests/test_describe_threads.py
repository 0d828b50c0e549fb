"""describe patches process-wide functions while it traces (the fused-attention,
recurrent and autocast emulations): calls from several threads at once must each get
the answer they get alone, and leave every patched function as it was."""
import threading

import torch.nn as nn
import torch.nn.functional as F

from helpers import describe_dict


def _mlp():
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))


def _encoder():
    return nn.TransformerEncoder(
        nn.TransformerEncoderLayer(d_model=32, nhead=4, batch_first=True), num_layers=2)


def _lstm():
    return nn.LSTM(16, 32, batch_first=True)


JOBS = [
    (_mlp, dict(input_shape=(32,), batch_size=8)),
    (_encoder, dict(input_shape=(12, 32), batch_size=4, amp=True)),
    (_lstm, dict(input_shape=(10, 16), batch_size=4, loss="mean")),
]


def test_describing_from_threads_gives_each_call_its_answer_alone():
    alone = [describe_dict(make(), **kwargs) for make, kwargs in JOBS]
    patched = (F.multi_head_attention_forward, getattr(F, "scaled_dot_product_attention",
                                                       None))
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
    for (k, i), d in results.items():
        assert d == alone[i], (k, i)
    assert (F.multi_head_attention_forward,
            getattr(F, "scaled_dot_product_attention", None)) == patched


def test_the_step_hands_on_a_trace_nothing_can_change():
    import dataclasses

    import pytest
    import torch.nn as nn

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
