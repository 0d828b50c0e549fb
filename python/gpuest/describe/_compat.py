"""The few places where PyTorch 1.13 and 2.x differ for describe.

Kept in one file so the rest of the package reads the same on both versions.
"""
from __future__ import annotations

import contextlib

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.multiprocessing.reductions import StorageWeakRef

TORCH_VERSION = torch.__version__.split("+")[0]


def job_stack() -> dict:
    """The describing process's stack as ModelDescription.stack (JSON mapping)."""
    from ..stack import software_stack, stack_json
    return stack_json(software_stack(torch))


def make_fake_mode() -> FakeTensorMode:
    """A FakeTensorMode that tolerates the odd real tensor a model keeps outside its
    parameters (2.x has a switch for it; 1.13 has not, and refuses them)."""
    try:
        return FakeTensorMode(allow_non_fake_inputs=True)
    except TypeError:  # 1.13
        return FakeTensorMode()


def fake_leaf(mode: FakeTensorMode, like: torch.Tensor, dtype=None,
              requires_grad=False) -> torch.Tensor:
    """A fake CPU tensor with ``like``'s shape and strides, without touching its data.

    Works for real and meta ``like`` alike (1.13's ``from_tensor`` refuses meta).
    """
    dtype = dtype or like.dtype
    meta = torch.empty_strided(tuple(like.shape), tuple(like.stride()), dtype=dtype,
                               device="meta")
    try:
        fake = FakeTensor(mode, meta, torch.device("cpu"))
    except TypeError:  # a newer constructor signature: go through the public door
        fake = mode.from_tensor(torch.empty_strided(tuple(like.shape), tuple(like.stride()),
                                                    dtype=dtype))
    if requires_grad:
        fake.requires_grad_(True)
    return fake


@contextlib.contextmanager
def outside_dispatch_modes():
    """Leave every active dispatch mode (the tracer, the fake mode) for the block, to
    make a tensor that neither sees; they are back after it. 2.x has a helper (its
    fake mode sits on a separate infra stack); 1.13 pops the one stack mode by mode."""
    from torch.utils import _python_dispatch as dispatch
    disable = getattr(dispatch, "_disable_current_modes", None)
    if disable is not None:
        with disable():
            yield
        return
    with contextlib.ExitStack() as stack:
        for _ in range(dispatch._len_torch_dispatch_stack()):
            stack.enter_context(dispatch._pop_mode_temporarily())
        yield


def storage_of(t: torch.Tensor):
    """The tensor's untyped storage (1.13 only offers the typed wrapper)."""
    if hasattr(t, "untyped_storage"):
        return t.untyped_storage()
    return t.storage()


def storage_ref(t: torch.Tensor) -> StorageWeakRef:
    """A weak reference to the tensor's storage: ``.cdata`` identifies the storage
    (views share it), ``.expired()`` says whether it was freed."""
    return StorageWeakRef(storage_of(t))


def storage_nbytes(t: torch.Tensor) -> int:
    return int(storage_of(t).nbytes())


def data_dependent_errors():
    """Exception types FakeTensor raises where an op needs real values (.item())."""
    errors = []
    try:
        from torch._subclasses.fake_tensor import DataDependentOutputException
        errors.append(DataDependentOutputException)
    except ImportError:
        pass
    try:
        from torch._subclasses.fake_tensor import DynamicOutputShapeException
        errors.append(DynamicOutputShapeException)
    except ImportError:
        pass
    return tuple(errors)
