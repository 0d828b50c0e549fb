"""lab/gpu/measure_op_transients.py's bookkeeping, on the CPU: which bytes of a call
count as held inside it, which calls become rows, and what a row says of a convolution.
The counters are scripted here (the caching allocator's exist only on a GPU); the ops,
their arguments and results are real."""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "lab", "gpu"))
import measure_op_transients as m  # noqa: E402


class ScriptedCounters:
    """memory_allocated() and the peak as a GPU would report them for the next call."""

    def __init__(self, allocated, peak, reserved=(0, 0)):
        self._allocated, self._peak = allocated, peak
        self._reserved = list(reserved)

    def allocated(self):
        return self._allocated

    def reserved(self):
        return self._reserved.pop(0) if self._reserved else 0

    def reset_peak(self):
        pass

    def peak(self):
        return self._peak


def test_a_convolution_row_says_its_geometry_and_what_it_held_inside():
    x = torch.randn(2, 3, 16, 16)
    w = torch.randn(8, 3, 3, 3)
    out_bytes = 2 * 8 * 8 * 8 * 4
    mode = m.make_op_transients(ScriptedCounters(10_000, 10_000 + out_bytes + 4096,
                                                 reserved=(0, 2 << 20)),
                                lambda: "forward")
    with mode:
        F.conv2d(x, w, stride=2, padding=1, groups=1)
    convs = [r for r in mode.rows if r["op"].startswith("convolution")]
    assert len(convs) == 1, mode.rows
    row = convs[0]
    assert row["inside_bytes"] == 4096
    assert row["out_bytes"] == out_bytes
    assert row["reserved_growth_bytes"] == 2 << 20
    assert row["phase"] == "forward"
    assert row["conv"] == {"stride": [2, 2], "padding": [1, 1], "dilation": [1, 1],
                           "transposed": False, "groups": 1}
    assert row["tensors"][:2] == [[[2, 3, 16, 16], "float32"], [[8, 3, 3, 3], "float32"]]


def test_an_op_that_held_nothing_inside_is_kept_only_if_it_is_a_convolution():
    x = torch.randn(4, 4)
    mode = m.make_op_transients(ScriptedCounters(1000, 1000 + 64), lambda: "forward")
    with mode:
        torch.relu(x)  # Returns 64 new bytes and held nothing else.
    assert mode.rows == []
    assert mode.calls == 1


def test_an_in_place_op_returns_no_new_bytes():
    x = torch.randn(4, 4)
    assert m.new_storage_bytes((x,), x.relu_()) == 0
    view = x.view(16)
    assert m.new_storage_bytes((x,), view) == 0
    assert m.new_storage_bytes((x,), x + 1) == 64


def test_inside_bytes_never_go_below_zero():
    # An optimizer's foreach op can free more than it returns.
    assert m.inside_bytes(1000, 900, 0) == 0
    assert m.inside_bytes(1000, 1500, 200) == 300


def test_a_convolution_backward_row_reads_its_own_signature():
    go = torch.randn(2, 8, 8, 8)
    x = torch.randn(2, 3, 16, 16)
    w = torch.randn(8, 3, 3, 3)
    row = m.describe_call("convolution_backward.default",
                          (go, x, w, [8], [2, 2], [1, 1], [1, 1], False, [0, 0], 1,
                           [True, True, True]))
    assert row["conv"] == {"stride": [2, 2], "padding": [1, 1], "dilation": [1, 1],
                           "transposed": False, "groups": 1}
    assert [t[0] for t in row["tensors"]] == [[2, 8, 8, 8], [2, 3, 16, 16], [8, 3, 3, 3]]


def test_a_steps_backward_convolutions_are_measured_in_their_phase():
    conv = torch.nn.Conv2d(3, 8, 3, padding=1)
    x = torch.randn(2, 3, 8, 8)
    phase = ["forward"]
    mode = m.make_op_transients(ScriptedCounters(0, 0), lambda: phase[0])
    with mode:
        loss = conv(x).sum()
        phase[0] = "backward"
        loss.backward()
    ops = [(r["phase"], r["op"].split(".")[0]) for r in mode.rows]
    assert ("forward", "convolution") in ops
    assert ("backward", "convolution_backward") in ops
