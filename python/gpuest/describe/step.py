"""One training step (forward, loss, backward, optimizer step) on fake tensors.

The model's parameters and buffers are swapped for fake tensors of the same shape
for the duration (and put back after, whatever happens), so nothing is computed and
no memory of the real batch size is touched; the tracer records every storage.
"""
from __future__ import annotations

import contextlib
from typing import List, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils._pytree import tree_flatten

from ._compat import fake_leaf, make_fake_mode
from .fused_attention import cuda_attention
from .layers import LayerRecorder
from .optim import optimizer_step
from .tracer import AllocationTracer

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


class InputSpec:
    """One positional model input: a tensor to fake (shape incl. batch, dtype), or a
    plain value passed as is."""

    def __init__(self, shape=None, dtype=None, value=None):
        self.shape, self.dtype, self.value = shape, dtype, value

    @property
    def is_tensor(self):
        return self.shape is not None


@contextlib.contextmanager
def fake_parameters(model: nn.Module, mode, dtype: torch.dtype):
    """Swap every parameter and buffer for a fake one; yields (params, buffers)."""
    swapped = []
    memo = {}
    params, buffers = [], []
    try:
        for m in model.modules():
            for table, out, grad in ((m._parameters, params, True), (m._buffers, buffers, False)):
                for name, t in list(table.items()):
                    if t is None:
                        continue
                    fake = memo.get(id(t))
                    if fake is None:  # tied weights stay tied
                        want = dtype if t.is_floating_point() else None
                        fake = fake_leaf(mode, t, dtype=want,
                                         requires_grad=grad and t.requires_grad)
                        memo[id(t)] = fake
                        out.append(fake)
                    swapped.append((table, name, t))
                    table[name] = fake
        yield params, buffers
    finally:
        for table, name, t in reversed(swapped):
            table[name] = t


def _fake_inputs(mode, specs: Sequence[InputSpec], dtype):
    args = []
    for s in specs:
        if not s.is_tensor:
            args.append(s.value)
            continue
        # Float inputs follow the model's dtype, as a training script casts them;
        # token ids and masks keep theirs.
        d = dtype if (s.dtype is None or s.dtype.is_floating_point) else s.dtype
        args.append(fake_leaf(mode, torch.empty(s.shape, device="meta"), dtype=d))
    return args


def _loss(output, target):
    tensors = [t for t in tree_flatten(output)[0]
               if isinstance(t, torch.Tensor) and t.is_floating_point() and t.requires_grad]
    if not tensors:
        raise RuntimeError("the model's output has no tensor that requires grad")
    first, rest = tensors[0], tensors[1:]
    if first.dim() == 2 and first.shape[1] > 1 and first.shape[0] == target.shape[0]:
        loss = F.cross_entropy(first, target)  # (batch, classes): a classifier
    else:
        loss = first.float().mean()
    for t in rest:  # auxiliary heads (GoogLeNet, Inception) train too
        loss = loss + t.float().mean()
    return loss


class _RealSaved:
    __slots__ = ("tensor",)

    def __init__(self, tensor):
        self.tensor = tensor


def _autocast(enabled: bool):
    if not enabled:
        return contextlib.nullcontext()
    # Fake tensors here live on "cpu"; CPU autocast only does bfloat16, which has the
    # bytes of float16 and so the same memory effect as CUDA AMP.
    return torch.autocast("cpu", dtype=torch.bfloat16)


def traced_step(model: nn.Module, specs: List[InputSpec], batch_size: int, optimizer: str,
                dtype: torch.dtype, amp: bool, recorder: LayerRecorder):
    """Run the step; returns the tracer with categories filled in.

    The recorder must already be attached; it sees the forward.
    """
    mode = make_fake_mode()
    tracer = AllocationTracer()
    was_training = model.training
    model.train()
    saved = set()

    def pack(t):
        if not isinstance(t, FakeTensor):
            # A Python number autograd saved as a real 0-dim tensor (``x / 8.0``):
            # handed back as is, 1.13 chokes on it in backward; re-fake it there.
            return _RealSaved(t)
        idx = tracer.track(t)
        if idx is not None and tracer.phase == "forward":
            saved.add(idx)
        return t

    def unpack(t):
        if not isinstance(t, _RealSaved):
            return t
        fake = mode.from_tensor(t.tensor)
        tracer.ignore(fake)  # a host scalar, not an allocation on the GPU
        return fake

    try:
        with fake_parameters(model, mode, dtype) as (params, buffers):
            model_state = [tracer.track(t) for t in params + buffers]
            args = _fake_inputs(mode, specs, dtype)
            inputs = [tracer.track(a) for a in args if isinstance(a, torch.Tensor)]
            # The batch's labels (a classifier's loss uses them), made before entering
            # the fake mode, which refuses to wrap meta tensors made inside it.
            target = fake_leaf(mode, torch.empty(batch_size, device="meta"),
                               dtype=torch.int64)
            inputs.append(tracer.track(target))

            with mode, tracer, cuda_attention():
                tracer.phase = "forward"
                with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
                    with _autocast(amp):
                        output = model(*args)
                        loss = _loss(output, target)
                    if amp:
                        loss = loss * 65536.0  # GradScaler's scaled loss
                tracer.phase = "backward"
                loss.backward()
                del output, loss
                tracer.reap()
                grads = [tracer.index_of(p.grad) for p in params if p.grad is not None]
                tracer.phase = "optimizer"
                state = optimizer_step(optimizer, params)
                tracer.reap()
                state_idx = [tracer.index_of(s) for s in state]

            categories = {}
            for i in saved:
                categories[i] = "ALLOCATION_CATEGORY_ACTIVATION"
            for i in state_idx:
                categories[i] = "ALLOCATION_CATEGORY_OPTIMIZER_STATE"
            for i in grads:
                categories[i] = "ALLOCATION_CATEGORY_GRADIENT"
            for i in inputs:
                categories[i] = "ALLOCATION_CATEGORY_INPUT"
            for i in model_state:
                categories[i] = "ALLOCATION_CATEGORY_PARAMETER"
            tracer.category = [categories.get(i, "ALLOCATION_CATEGORY_TEMPORARY")
                               for i in range(len(tracer.sizes))]
            del state, target, args
    finally:
        tracer.close()
        model.train(was_training)
    return tracer


def fake_forward(model: nn.Module, specs: List[InputSpec], dtype: torch.dtype, amp: bool):
    """A forward without gradients on fake tensors: enough for the layer sequence."""
    mode = make_fake_mode()
    was_training = model.training
    model.train()
    try:
        with fake_parameters(model, mode, dtype):
            args = _fake_inputs(mode, specs, dtype)
            with mode, torch.no_grad(), _autocast(amp):
                model(*args)
    finally:
        model.train(was_training)


def real_forward(model: nn.Module, specs: List[InputSpec], batch: int):
    """Last resort for the layer sequence: a real forward of a tiny batch on the CPU,
    in eval mode (a batch of 1 or 2 would upset batch norm's training statistics)."""
    if any(p.device.type == "meta" for p in model.parameters()):
        raise RuntimeError("parameters are on the meta device: no real forward possible")
    args = []
    for s in specs:
        if not s.is_tensor:
            args.append(s.value)
            continue
        shape = (batch, *s.shape[1:])
        d = s.dtype or torch.float32
        args.append(torch.zeros(shape, dtype=d) if not d.is_floating_point
                    else torch.randn(shape, dtype=d))
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            model(*args)
    finally:
        model.train(was_training)
