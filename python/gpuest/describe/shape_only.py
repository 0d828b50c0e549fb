"""Shape-only stand-ins for ops that FakeTensor would otherwise run for real.

On torch 1.13 ``aten.convolution_backward`` has no meta kernel, so FakeTensor falls
back to the real CPU kernel on zero-filled tensors: 7 s for one ResNet-50 backward at
batch 32. Its outputs are simply shaped like its inputs, so they are made empty here
(the bytes are what the trace needs). Harmless on 2.x, where it is also quicker.
"""
from __future__ import annotations

import torch

aten = torch.ops.aten


def _convolution_backward(grad_output, input, weight, bias_sizes, stride, padding,
                          dilation, transposed, output_padding, groups, output_mask):
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        grad_input = torch.empty_like(input)
    if output_mask[1]:
        grad_weight = torch.empty_like(weight)
    if output_mask[2]:
        channels = grad_output.shape[1]
        grad_bias = grad_output.new_empty((channels,))
    return grad_input, grad_weight, grad_bias


SHAPE_ONLY_OPS = {aten.convolution_backward.default: _convolution_backward}
