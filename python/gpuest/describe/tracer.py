"""Record every storage one training step creates, and when each one dies.

A TorchDispatchMode sees every ATen op and its outputs; a storage not seen before is
an allocation. Deaths are found without polling every live storage after every op:
a weak reference on the Python tensor that brought a storage in says when that
tensor died, and only then is the storage itself asked (``StorageWeakRef.expired``)
whether it is gone. Storages still held from C++ only (autograd's buffers, .grad)
stay on a short "pending" list and are asked again after each op.

Times are a clock that ticks once per allocation and once per free, starting at 1, so
``free_at == 0`` can mean "alive at the end of the step" as the proto says.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ._compat import storage_nbytes, storage_ref
from .conv_workspace import workspace_bytes
from .shape_only import SHAPE_ONLY_OPS, can_run_in_float32, run_in_float32


@dataclass(frozen=True)
class Trace:
    """What one traced step allocated, when, and what for: the tracer's record, fixed
    once the step is done (a describe call hands this on, never the live tracer)."""
    sizes: Tuple[int, ...]
    alloc_at: Tuple[int, ...]
    free_at: Tuple[int, ...]
    category: Tuple[str, ...]
    phase_of: Tuple[str, ...]  # the phase that made each allocation
    loss: str                  # the loss the step computed
    ops: int                   # ATen ops the step ran


class AllocationTracer(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.sizes: List[int] = []
        self.alloc_at: List[int] = []
        self.free_at: List[int] = []
        self.phase_of: List[str] = []     # phase that allocated each storage
        self.category: List[Optional[str]] = []  # set by the step once it knows
        self.phase = "setup"
        self.loss = ""                     # the loss the step computed, once known
        self.ops = 0
        self._clock = 0
        self._live: Dict[int, tuple] = {}    # storage id -> (index, StorageWeakRef)
        self._watch: Dict[int, list] = {}    # storage id -> weakrefs on its tensors
        self._suspects: List[int] = []       # filled by weakref callbacks
        self._pending: set = set()
        self._ignored: set = set()          # storages that are not device memory
        self.workspaces: List[int] = []      # indices of cuDNN workspaces (conv_workspace.py)

    # -- bookkeeping --------------------------------------------------------------
    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    def reserve_tick(self) -> int:
        """A time on the clock now, for an allocation recorded later with
        ``track(t, at=...)`` (a tensor whose shape is known only later, like the
        labels of a loss that depend on the output's shape)."""
        return self._tick()

    def track(self, t: torch.Tensor, at: Optional[int] = None) -> Optional[int]:
        """Index of ``t``'s storage in the trace, recording it if it is new (at time
        ``at``, a reserved tick, when given)."""
        ref = storage_ref(t)
        key = ref.cdata
        if key in self._ignored:
            return None
        hit = self._live.get(key)
        if hit is not None:
            return hit[0]
        nbytes = storage_nbytes(t)
        if nbytes == 0:
            return None  # no device memory: not an allocation
        idx = self._record(nbytes, self._tick() if at is None else at)
        self._live[key] = (idx, ref)
        self._watch[key] = [weakref.ref(t, lambda _r, k=key: self._suspects.append(k))]
        return idx

    def _record(self, nbytes: int, alloc_at: int, free_at: int = 0) -> int:
        """A new event of the trace (its category set later by the step); its index."""
        self.sizes.append(nbytes)
        self.alloc_at.append(alloc_at)
        self.free_at.append(free_at)
        self.phase_of.append(self.phase)
        self.category.append(None)
        return len(self.sizes) - 1

    def held_during_op(self, nbytes: int) -> int:
        """Record an allocation the op makes and frees before it returns, while its
        outputs are alive (a library's workspace); its index in the trace."""
        alloc_at = self._tick()
        return self._record(nbytes, alloc_at, self._tick())

    def ignore(self, t: torch.Tensor) -> None:
        """Never record ``t``'s storage (a host-side scalar autograd kept)."""
        ref = storage_ref(t)
        self._ignored.add(ref.cdata)
        self._watch.setdefault(-1, []).append(ref)  # keep the id from being reused

    def index_of(self, t: torch.Tensor) -> Optional[int]:
        hit = self._live.get(storage_ref(t).cdata)
        return None if hit is None else hit[0]

    def reap(self) -> None:
        """Record the frees of storages that died since the last call."""
        if self._suspects:
            self._pending.update(self._suspects)
            self._suspects.clear()
        if not self._pending:
            return
        dead = [k for k in self._pending if k not in self._live or self._live[k][1].expired()]
        # Storages that died together are freed in trace order, not in the set's
        # (address-dependent) order, so that describing a model twice gives one trace.
        dead.sort(key=lambda k: self._live[k][0] if k in self._live else -1)
        for k in dead:
            self._pending.discard(k)
            hit = self._live.pop(k, None)
            self._watch.pop(k, None)
            if hit is not None:
                self.free_at[hit[0]] = self._tick()

    def live_indices(self):
        return [idx for idx, _ in self._live.values()]

    def freeze(self) -> Trace:
        """The record so far, as a Trace nothing can change."""
        return Trace(tuple(self.sizes), tuple(self.alloc_at), tuple(self.free_at),
                     tuple(c or "ALLOCATION_CATEGORY_TEMPORARY" for c in self.category),
                     tuple(self.phase_of), self.loss, self.ops)

    def close(self) -> None:
        """Forget the weak references (callbacks must not outlive the trace)."""
        self._watch.clear()
        self._live.clear()
        self._pending.clear()

    # -- the mode -------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        shortcut = SHAPE_ONLY_OPS.get(func)
        if shortcut is not None:
            out = shortcut(*args, **kwargs)
        else:
            try:
                out = func(*args, **kwargs)
            except RuntimeError as e:
                if not can_run_in_float32(func, e):
                    raise
                out = run_in_float32(func, args, kwargs)
        self.ops += 1
        self.reap()
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.track(t)
        workspace = workspace_bytes(func, args, out)
        if workspace:
            self.workspaces.append(self.held_during_op(workspace))
        return out
