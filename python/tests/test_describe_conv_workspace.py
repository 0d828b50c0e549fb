"""cuDNN's heuristic-mode workspaces: each convolution call holds one while it runs
(gpuest/describe/conv_workspace.py), and the traced step carries it at the call."""
import importlib

import torch
import torch.nn as nn

from helpers import check_trace_shape, describe_dict

conv_workspace = importlib.import_module("gpuest.describe.conv_workspace")

B = 8


def _t(*shape):
    return torch.empty(shape)


def _workspaces(trace):
    return [(int(s), int(a), int(f)) for s, a, f, c in
            zip(trace["sizeBytes"], trace["allocAt"], trace["freeAt"], trace["category"])
            if c == "ALLOCATION_CATEGORY_WORKSPACE"]


def test_spatial_convolution_holds_a_transformed_copy_of_its_tensors():
    x, w, y = _t(B, 16, 32, 32), _t(32, 16, 3, 3), _t(B, 32, 32, 32)
    nbytes = lambda t: t.numel() * 4  # noqa: E731
    assert conv_workspace.forward_workspace(x, w, y, 1, False) == \
        nbytes(x) + nbytes(y) + nbytes(w)
    assert conv_workspace.backward_workspace(y, x, w, 1, False) == \
        nbytes(y) + nbytes(x) + nbytes(w)


def test_pointwise_convolution_runs_as_a_gemm_and_its_weight_gradient_splits_the_batch():
    x, w, y = _t(B, 256, 56, 56), _t(64, 256, 1, 1), _t(B, 64, 56, 56)
    assert conv_workspace.forward_workspace(x, w, y, 1, False) == 0
    # Wide and shallow: batch x the filter is far smaller than the transform.
    assert conv_workspace.backward_workspace(y, x, w, 1, False) == B * w.numel() * 4
    # Deep and small: the transform is the smaller one.
    x, w, y = _t(B, 2048, 7, 7), _t(512, 2048, 1, 1), _t(B, 512, 7, 7)
    assert conv_workspace.backward_workspace(y, x, w, 1, False) == \
        (x.numel() + y.numel() + w.numel()) * 4


def test_depthwise_convolutions_hold_none_but_a_large_filters_gradient():
    x, y = _t(B, 96, 56, 56), _t(B, 96, 56, 56)
    small, large = _t(96, 1, 3, 3), _t(96, 1, 7, 7)
    assert conv_workspace.forward_workspace(x, large, y, 96, False) == 0
    assert conv_workspace.backward_workspace(y, x, small, 96, False) == 0
    assert conv_workspace.backward_workspace(y, x, large, 96, False) > 0


def test_the_traced_step_holds_each_workspace_only_during_its_call():
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
                          nn.Conv2d(16, 16, 3, padding=1), nn.Flatten(),
                          nn.Linear(16 * 16 * 16, 10))
    trace = describe_dict(model, input_shape=(3, 16, 16), batch_size=B)["trace"]
    check_trace_shape(trace)
    held = _workspaces(trace)
    # Two forward calls and two backward calls (the first layer's input needs no
    # gradient, so its backward computes the weight's alone).
    assert len(held) == 4
    for size, alloc_at, free_at in held:
        assert size > 0
        assert free_at == alloc_at + 1  # freed before the next allocation of the step
    # The second convolution's forward: its input, output and filter, fp32.
    second = (B * 16 * 16 * 16) * 2 * 4 + 16 * 16 * 9 * 4
    assert second in [size for size, _, _ in held]


def test_a_step_without_convolutions_holds_no_workspace():
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
    trace = describe_dict(model, input_shape=(32,), batch_size=B)["trace"]
    assert _workspaces(trace) == []
