"""Builds a job's model: a seed-style synthetic model (``gpuest.synthetic``), a
torchvision model, or a timm model from the vendored timm source.

timm is imported from its source folder (``../shared/vendor/timm-src-*.tar.gz``,
extracted; the folder that holds the ``timm`` package), after giving torch 1.13 the
fused attention of 2.x, so that timm takes the path it takes on the torch 2.x the
measurements run on (``gpuest.describe.fused_attention``).
"""
from __future__ import annotations

import importlib.util
import os
import sys
from typing import Optional, Tuple

TIMM_SOURCE_ENV = "GPUEST_TIMM_SRC"


class ModelUnavailable(RuntimeError):
    """The job's model cannot be built here (unknown name, timm not importable)."""


_NO_TIMM = (f"extract ../shared/vendor/timm-src-*.tar.gz and pass --timm-src (or set "
            f"{TIMM_SOURCE_ENV}) to the folder that holds timm/")


def timm_source(source_dir: Optional[str] = None) -> Optional[str]:
    """The folder timm is imported from (``source_dir``, else $GPUEST_TIMM_SRC), or None
    for an installed timm; ModelUnavailable when there is neither. Imports nothing, so
    the collector can refuse a plan of timm jobs before it turns them into ERROR rows."""
    source_dir = source_dir or os.environ.get(TIMM_SOURCE_ENV)
    if source_dir:
        if not os.path.isfile(os.path.join(source_dir, "timm", "__init__.py")):
            raise ModelUnavailable(f"{source_dir} holds no timm/ package: {_NO_TIMM}")
        return source_dir
    if importlib.util.find_spec("timm") is None:
        raise ModelUnavailable(f"timm is not installed: {_NO_TIMM}")
    return None


def import_timm(source_dir: Optional[str] = None):
    """The timm module, from ``source_dir`` (or $GPUEST_TIMM_SRC) when given, with
    torch 2.x's fused attention provided first (a no-op on 2.x)."""
    from ..describe.fused_attention import provide_torch2_attention
    source_dir = timm_source(source_dir)
    if source_dir and source_dir not in sys.path:
        sys.path.insert(0, source_dir)
    provide_torch2_attention()  # before timm's import: it picks its attention path there
    try:
        import timm
    except ImportError as e:
        raise ModelUnavailable(f"timm is not importable ({e}): {_NO_TIMM}") from None
    return timm


def build(job, device="cpu"):
    """``(model, per-sample input shape, extra describe arguments)`` for a job."""
    if job.source == "synthetic":
        from ..synthetic import rebuild
        model, shape, _, extra = rebuild(None, job.model, device=device)
        kwargs = {}
        if extra["sequence_length"]:
            kwargs = {"input_dtype": "int64", "sequence_length": extra["sequence_length"]}
        return model, tuple(shape), kwargs
    if job.source == "torchvision":
        import torchvision.models as tvm
        factory = getattr(tvm, job.model, None)
        if not callable(factory):
            raise ModelUnavailable(f"torchvision.models has no model {job.model!r}")
        model = factory()
        return model.to(device), _shape(job), _dtype_kwargs(job)
    if job.source == "timm":
        timm = import_timm()
        try:
            model = timm.create_model(job.model, pretrained=False)
        except RuntimeError as e:  # timm's "Unknown model"
            raise ModelUnavailable(f"timm cannot build {job.model!r}: {e}") from None
        shape = job.input_shape or tuple(model.pretrained_cfg["input_size"])
        return model.to(device), tuple(shape), _dtype_kwargs(job)
    raise ModelUnavailable(f"unknown source {job.source!r}")


def _shape(job) -> Tuple[int, ...]:
    if not job.input_shape:
        raise ModelUnavailable(f"{job.id}: no input shape")
    return tuple(job.input_shape)


def _dtype_kwargs(job) -> dict:
    if job.input_dtype == "int64":
        return {"input_dtype": "int64"}
    return {}
