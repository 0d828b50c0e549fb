"""One describe call's hold on the process, and everything it swaps in.

Describing a model swaps things that are not its own for the length of a fake run:
process-wide functions (fused_attention.py's F.multi_head_attention_forward and
F.scaled_dot_product_attention, recurrent.py's torch.nn.modules.rnn._VF,
cuda_autocast.py's kernels on the AutocastCPU key) and the model's parameters,
buffers and layer hooks. A TraceSession owns all of it. Entered, it holds the
describe lock (two calls at once would see each other's patches) and the model's
layer hooks; ``fake_run`` gives the model a fresh fake mode and fake parameters,
``emulating`` enters that mode and every emulation on one ExitStack, and
``autocast_region`` opens CUDA autocast's region around a forward. Each is put back
on the way out, whatever happens. The step (step.py) hands back a frozen Trace.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Dict, Iterator, List, Optional, Tuple

import torch
import torch.nn as nn
from torch._subclasses.fake_tensor import FakeTensorMode

from ._compat import fake_leaf, make_fake_mode
from .cuda_autocast import CudaAutocast
from .fused_attention import cuda_attention
from .layers import LayerRecorder
from .recurrent import cudnn_recurrent, current_flat_weights

# One session at a time in a process; a second thread waits for the first. Reentrant,
# so that a step function may describe a sub-model (a session inside a session).
_LOCK = threading.RLock()


class TraceSession:
    """``with TraceSession(model, batch_size, amp) as session:`` everything a describe
    call does to ``model`` and to the process, held and then put back.

    ``recorder`` records the layer sequence (attached for the session; the step
    detaches it after the first forward). ``autocast`` is CUDA autocast's emulation at
    ``amp`` (None without mixed precision): the attention and recurrent emulations ask
    it, through ``dtype()``, whether a forward's region casts. ``mode`` is the fake
    mode of the run in progress, None between runs.
    """

    def __init__(self, model: nn.Module, batch_size: int,
                 amp: Optional[torch.dtype] = None):
        self.model = model
        self.recorder = LayerRecorder(model, batch_size)
        self.autocast = CudaAutocast(amp) if amp is not None else None
        self.mode: Optional[FakeTensorMode] = None
        self._held: Optional[contextlib.ExitStack] = None

    def __enter__(self) -> "TraceSession":
        with contextlib.ExitStack() as stack:
            stack.enter_context(_LOCK)
            stack.callback(self.recorder.detach)  # also after a partial attach
            self.recorder.attach()
            self._held = stack.pop_all()
        return self

    def __exit__(self, *exc) -> None:  # None: an exception goes on out
        held, self._held = self._held, None
        assert held is not None, "TraceSession exited without being entered"
        held.__exit__(*exc)  # nothing held suppresses one

    @contextlib.contextmanager
    def fake_run(self, dtype: torch.dtype) -> Iterator[Tuple[List[torch.Tensor],
                                                             List[torch.Tensor]]]:
        """One run on fake tensors: a fresh fake mode (a failed trace's fakes stay
        with it), the model in training mode, its parameters and buffers swapped for
        fakes (``fake_parameters``); yields (params, buffers). The mode is not entered
        yet: inputs are made in it first (``emulating`` enters it)."""
        with contextlib.ExitStack() as stack:
            self.mode = make_fake_mode()
            stack.callback(setattr, self, "mode", None)
            stack.callback(self.model.train, self.model.training)
            self.model.train()
            yield stack.enter_context(fake_parameters(self.model, self.mode, dtype))

    @contextlib.contextmanager
    def emulating(self, *dispatch_modes) -> Iterator[None]:
        """Within ``fake_run``: the fake mode entered, then ``dispatch_modes`` (the
        step's tracer) inside it, then every process-wide emulation; all left in
        reverse order at the block's exit."""
        if self.mode is None:
            raise RuntimeError("emulating() runs inside fake_run()")
        with contextlib.ExitStack() as stack:
            stack.enter_context(self.mode)
            for m in dispatch_modes:
                stack.enter_context(m)
            stack.enter_context(cuda_attention(self.autocast))
            stack.enter_context(cudnn_recurrent(self.autocast))
            yield

    def autocast_region(self):
        """CUDA autocast's region, for one forward and its loss, as a training loop
        writes it (its exit frees the weight casts autograd did not save, and removes
        the kernels); nothing without mixed precision."""
        return self.autocast or contextlib.nullcontext()


@contextlib.contextmanager
def fake_parameters(model: nn.Module, mode, dtype: torch.dtype):
    """Swap every parameter and buffer for a fake one; yields (params, buffers).

    Floating tensors take ``dtype``, unless the model's parameters already hold
    several float dtypes: then the model was prepared for its run (PEFT keeps LoRA
    adapters in float32 beside 16-bit base weights, and casts their input up to
    match, so autograd saves a float32 copy per adapter), and each keeps its own."""
    swapped = []
    memo: Dict[int, torch.Tensor] = {}
    params: List[torch.Tensor] = []
    buffers: List[torch.Tensor] = []
    keep_own = len({p.dtype for p in model.parameters() if p.is_floating_point()}) > 1
    try:
        for m in model.modules():
            for table, out, grad in ((m._parameters, params, True), (m._buffers, buffers, False)):
                for name, t in list(table.items()):
                    if t is None:
                        continue
                    fake = memo.get(id(t))
                    if fake is None:  # tied weights stay tied
                        want = dtype if t.is_floating_point() and not keep_own else None
                        fake = fake_leaf(mode, t, dtype=want,
                                         requires_grad=grad and t.requires_grad)
                        memo[id(t)] = fake
                        out.append(fake)
                    swapped.append((table, name, t))
                    table[name] = fake
        with current_flat_weights(model):
            yield params, buffers
    finally:
        for table, name, t in reversed(swapped):
            table[name] = t
