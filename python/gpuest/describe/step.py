"""One training step (forward, loss, backward, optimizer step) on fake tensors.

The model's parameters and buffers are swapped for fake tensors of the same shape
for the duration, and the emulations patched in, by the describe call's TraceSession
(session.py), which puts everything back after, whatever happens; so nothing is
computed and no memory of the real batch size is touched. The tracer records every
storage.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Sequence

import torch
import torch.nn as nn
from torch._subclasses.fake_tensor import FakeTensor

from ._compat import fake_leaf, outside_dispatch_modes
from .losses import STEP_FUNCTION, needs_target, training_loss
from .optim import optimizer_step
from .session import TraceSession
from .tracer import AllocationTracer, Trace

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


class InputSpec:
    """One positional model input: a tensor to fake (shape incl. batch, dtype), or a
    plain value passed as is."""

    def __init__(self, shape=None, dtype=None, value=None):
        self.shape, self.dtype, self.value = shape, dtype, value

    @property
    def is_tensor(self):
        return self.shape is not None


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


class _RealSaved:
    __slots__ = ("tensor",)

    def __init__(self, tensor):
        self.tensor = tensor


class _GradScaler:
    """The memory of torch.cuda.amp.GradScaler in one step (torch/cuda/amp/
    grad_scaler.py): ``scale()`` creates, on first use, the (1,) fp32 scale and (1,)
    int32 growth tracker it keeps, and multiplies the loss; ``unscale()``, what
    ``step`` calls first, makes the fp32 inverse scale (through a float64 reciprocal)
    and a (1,) found-inf flag for the device, which ``update()`` drops after the
    optimizer step. The gradients are unscaled in place (no memory)."""

    def __init__(self):
        self.scale_ = torch.full((1,), 65536.0, dtype=torch.float32)
        self.growth_tracker = torch.full((1,), 0, dtype=torch.int32)

    def scale(self, loss):
        return loss * self.scale_

    def unscale(self):
        inv_scale = self.scale_.double().reciprocal().float()
        found_inf = torch.full((1,), 0.0, dtype=torch.float32)
        return inv_scale, found_inf

    def state(self):
        return [self.scale_, self.growth_tracker]


def _batch_for_step(args):
    """What a caller's ``step(model, batch)`` gets: the input, or the tuple of inputs."""
    return args[0] if len(args) == 1 else tuple(args)


def _check_step_loss(value):
    if not isinstance(value, torch.Tensor) or value.numel() != 1 or not value.requires_grad:
        what = (f"a tensor of shape {tuple(value.shape)}"
                + ("" if value.requires_grad else " that does not require grad")
                if isinstance(value, torch.Tensor) else type(value).__name__)
        raise RuntimeError(f"the step function must return the scalar loss, got {what}")
    return value


def traced_step(session: TraceSession, specs: List[InputSpec], batch_size: int,
                optimizer: str, dtype: torch.dtype, loss: str = "auto",
                step_fn: Optional[Callable] = None, micro_batches: int = 1,
                optimizer_impl: str = "foreach") -> Trace:
    """Run the step on ``session``'s model, under its emulations (mixed precision:
    its autocast); returns the Trace (tracer.py): every allocation with its category,
    and the name of the loss it computed.

    ``loss`` is one of losses.LOSSES; ``step_fn(model, batch) -> loss``, when given,
    runs instead of the forward and that loss (the caller's own code, on the fake
    tensors). ``micro_batches`` above 1: gradient accumulation, the forward and
    backward of two micro-batches before the optimizer step. The session's recorder
    sees the first forward only (it is detached before the backward).
    """
    model, amp = session.model, session.autocast.lower if session.autocast else None
    tracer = AllocationTracer()
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
        with session.fake_run(dtype) as (params, buffers):
            mode = session.mode
            model_state = [tracer.track(t) for t in params + buffers]
            args = _fake_inputs(mode, specs, dtype)
            inputs = [tracer.track(a) for a in args if isinstance(a, torch.Tensor)]
            labels = None
            if step_fn is None and loss == "auto":
                # The batch's labels (a classifier's loss uses them), made before
                # entering the fake mode, which refuses to wrap meta tensors made
                # inside it.
                labels = fake_leaf(mode, torch.empty(batch_size, device="meta"),
                                   dtype=torch.int64)
                inputs.append(tracer.track(labels))
            # An explicit loss's target has the output's shape, known after the
            # forward; it is loaded with the batch, so its time is taken now.
            target_at = tracer.reserve_tick() if step_fn is None and needs_target(loss) else None

            targets = []  # one per batch: the micro-batches reuse the first's

            def make_target(shape, target_dtype):
                if targets:
                    return targets[0]
                with outside_dispatch_modes():
                    target = fake_leaf(mode, torch.empty(shape, device="meta"),
                                       dtype=target_dtype)
                inputs.append(tracer.track(target, at=target_at))
                targets.append(target)
                return target

            with session.emulating(tracer):
                scaler = None
                # Gradient accumulation: the second micro-batch's backward runs beside
                # the gradients the first left, and adds into them; later ones repeat it.
                for micro in range(min(micro_batches, 2)):
                    tracer.phase = "forward"
                    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
                        # The forward and loss under autocast, as a training loop writes
                        # them; its exit frees the weight casts autograd did not save.
                        with session.autocast_region():
                            if step_fn is not None:
                                output = None
                                value = _check_step_loss(
                                    step_fn(model, _batch_for_step(args)))
                                tracer.loss = STEP_FUNCTION
                            else:
                                output = model(*args)
                                value, tracer.loss = training_loss(loss, output, labels,
                                                                   make_target, dtype)
                        # A GradScaler goes with float16 autocast: bfloat16 has float32's
                        # range and trains without one (the AMP recipes' advice).
                        if micro == 0 and amp == torch.float16:
                            scaler = _GradScaler()
                        if scaler is not None:
                            value = scaler.scale(value)
                    # The layer sequence is the first forward's: not the next
                    # micro-batch's, nor checkpointing's recomputation in backward.
                    session.recorder.detach()
                    tracer.phase = "backward"
                    value.backward()
                    del output, value
                    tracer.reap()
                targets.clear()  # a batch's target dies with its last backward's graph
                grads = [tracer.index_of(p.grad) for p in params if p.grad is not None]
                tracer.phase = "optimizer"
                unscaled = scaler.unscale() if scaler is not None else ()
                state = optimizer_step(optimizer, params, impl=optimizer_impl)
                del unscaled  # GradScaler.update() drops them after the step
                state += scaler.state() if scaler is not None else []
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
            for i in tracer.workspaces:
                categories[i] = "ALLOCATION_CATEGORY_WORKSPACE"
            tracer.category = [categories.get(i, "ALLOCATION_CATEGORY_TEMPORARY")
                               for i in range(len(tracer.sizes))]
            del state, labels, args, scaler
            trace = tracer.freeze()
    finally:
        tracer.close()
    return trace


def fake_forward(session: TraceSession, specs: List[InputSpec], dtype: torch.dtype):
    """A forward without gradients on fake tensors, under the session's emulations:
    enough for the layer sequence."""
    with session.fake_run(dtype):
        args = _fake_inputs(session.mode, specs, dtype)
        with session.emulating(), torch.no_grad(), session.autocast_region():
            session.model(*args)


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
