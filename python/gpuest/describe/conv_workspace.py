"""cuDNN's workspace for one convolution call in heuristic mode (benchmark off): device
memory the call allocates through the caching allocator, holds while it runs and frees
before it returns. A trace on fake tensors runs no cuDNN, so the tracer adds it as an
allocation of its own (ALLOCATION_CATEGORY_WORKSPACE) at the call.

PyTorch asks cuDNN's heuristics for engines and runs the first one that builds, whatever
its workspace (ATen native/cudnn/Conv_v8.cpp: get_plans_from_heuristics, try_plans). What
those engines hold was measured per call on an H100 (cuDNN 9.19, PyTorch 2.11, fp32
NCHW tensors, nine timm models: ../shared/data/h100-op-transients/, made by
lab/gpu/measure_op_transients.py). Two mechanisms account for nearly all of it:

- Layout transforms. Engines that run in another layout (NHWC tensor-core kernels)
  hold a transformed copy of the call's tensors: the input, the output and the filter
  (the backward: the output's gradient, the input and the filter). Measured, the
  workspace equals that sum (x1.00 at the median of spatial and grouped convolutions,
  forward and backward).
- Split over the batch. For a 1x1 convolution's weight gradient the engine sums
  per-sample partial gradients: batch x the filter's bytes. The heuristics pick it
  where it is the smaller of the two (so a wide, shallow layer's gradient holds a few
  MiB where the transform would hold hundreds).

Forward 1x1 convolutions run as plain GEMMs on the NCHW tensors (no workspace at the
median), and depthwise convolutions have kernels of their own with none forward and
none backward for 3x3 filters.

Known misses, on the measured rows: depthwise 7x7 backward at 28x28 and above held
8.3-8.5x its input (ConvNeXt) where this rule says the transform (2x); some 1x1
backward calls picked the transform where the split was smaller (MobileViT-v2's
128x128 stages). The server's safe factor carries what remains.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import torch

aten = torch.ops.aten

FORWARD = (aten.convolution.default,)
BACKWARD = (aten.convolution_backward.default,)


def _nbytes(t: torch.Tensor) -> int:
    return math.prod(t.shape) * t.element_size()


def _filter_is_pointwise(weight: torch.Tensor) -> bool:
    return all(k == 1 for k in weight.shape[2:])


def _is_depthwise(input: torch.Tensor, groups: int) -> bool:
    return groups > 1 and groups == input.shape[1]


def forward_workspace(input: torch.Tensor, weight: torch.Tensor, output: torch.Tensor,
                      groups: int, transposed: bool) -> int:
    """Bytes cuDNN's heuristic engine holds for one forward convolution."""
    if _is_depthwise(input, groups) and not transposed:
        return 0
    if groups == 1 and _filter_is_pointwise(weight):
        return 0
    return _nbytes(input) + _nbytes(output) + _nbytes(weight)


def backward_workspace(grad_output: torch.Tensor, input: torch.Tensor,
                       weight: torch.Tensor, groups: int, transposed: bool) -> int:
    """Bytes held at once by one convolution_backward (its data and weight gradients
    run one after the other, so the larger of theirs)."""
    transform = _nbytes(grad_output) + _nbytes(input) + _nbytes(weight)
    if _is_depthwise(input, groups) and not transposed:
        small_filter = all(k <= 3 for k in weight.shape[2:])
        return 0 if small_filter else transform
    if groups == 1 and _filter_is_pointwise(weight):
        split_over_batch = input.shape[0] * _nbytes(weight)
        return min(split_over_batch, transform)
    return transform


def workspace_bytes(func, args: Sequence, out) -> Optional[int]:
    """The workspace of one ATen call, or None when the call is no convolution (or its
    tensors are not laid out as a 2-d or 3-d convolution's are)."""
    if func in FORWARD:
        input, weight = args[0], args[1]
        transposed, groups = bool(args[6]), int(args[8])
        output = out
        tensors = (input, weight, output)
    elif func in BACKWARD:
        grad_output, input, weight = args[0], args[1], args[2]
        transposed, groups = bool(args[7]), int(args[9])
        tensors = (grad_output, input, weight)
    else:
        return None
    if not all(isinstance(t, torch.Tensor) and t.dim() >= 4 for t in tensors):
        return None  # 1-d convolutions and odd calls: not what was measured
    if func in FORWARD:
        return forward_workspace(input, weight, output, groups, transposed)
    return backward_workspace(grad_output, input, weight, groups, transposed)
