"""How a job spreads over GPUs, for its description (``ModelDescription.parallelism``).

The server derives each rank's allocations from the unsharded step's trace
(estimators/allocsim/parallelism.h); what only the model can say is the size of the
largest unit that sharding gathers at once: the largest block an FSDP auto-wrap policy
wraps (transformer layers, the entries of an ``nn.ModuleList`` of repeated blocks) or,
without such blocks, the largest parameter tensor.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

import torch
import torch.nn as nn

from .errors import DescribeError

SHARDINGS = {
    "none": "SHARDING_NONE", "ddp": "SHARDING_NONE",
    "optimizer": "SHARDING_OPTIMIZER", "zero1": "SHARDING_OPTIMIZER",
    "gradients": "SHARDING_GRADIENTS", "zero2": "SHARDING_GRADIENTS",
    "fsdp-shard-grad-op": "SHARDING_GRADIENTS",
    "parameters": "SHARDING_PARAMETERS", "zero3": "SHARDING_PARAMETERS",
    "fsdp-full-shard": "SHARDING_PARAMETERS",
}
_KEYS = {"data_parallel", "sharding", "tensor_parallel", "offload_optimizer",
         "offload_parameters", "gradient_as_bucket_view", "largest_unit_bytes"}


def largest_unit_bytes(model: nn.Module, dtype: torch.dtype) -> int:
    """Bytes, at the job's parameter dtype, of the largest entry of any nn.ModuleList
    (the repeated blocks FSDP wraps one by one); the largest parameter tensor when the
    model has no such list."""
    size = torch.tensor([], dtype=dtype).element_size()

    def bytes_of(module: nn.Module) -> int:
        return sum(p.numel() for p in module.parameters()) * size

    largest = 0
    for module in model.modules():
        if isinstance(module, nn.ModuleList):
            for block in module:
                largest = max(largest, bytes_of(block))
    if largest == 0:
        largest = max((p.numel() * size for p in model.parameters()), default=0)
    return int(largest)


def parallelism_json(spec: Optional[Mapping[str, Any]], model: nn.Module,
                     dtype: torch.dtype) -> Optional[Dict[str, Any]]:
    """The description's ``parallelism`` (protobuf JSON) from ``spec``: a dict with
    ``data_parallel`` (GPUs), ``sharding`` (none|ddp, optimizer|zero1,
    gradients|zero2|fsdp-shard-grad-op, parameters|zero3|fsdp-full-shard),
    ``tensor_parallel``, ``offload_optimizer``, ``offload_parameters``,
    ``gradient_as_bucket_view``, and optionally ``largest_unit_bytes`` (else measured
    on the model). None: one GPU."""
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise DescribeError(f"parallelism must be a dict, got {type(spec).__name__}")
    unknown = set(spec) - _KEYS
    if unknown:
        raise DescribeError(f"parallelism: unknown keys {sorted(unknown)}; "
                            f"known: {sorted(_KEYS)}")
    out: Dict[str, Any] = {}
    for key, field in (("data_parallel", "dataParallel"),
                       ("tensor_parallel", "tensorParallel")):
        value = spec.get(key, 0)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise DescribeError(f"parallelism.{key} must be a whole number >= 0, "
                                f"got {value!r}")
        if value:
            out[field] = value
    sharding = spec.get("sharding", "none")
    if sharding not in SHARDINGS:
        raise DescribeError(f"parallelism.sharding: unknown {sharding!r}; one of "
                            f"{', '.join(SHARDINGS)}")
    if SHARDINGS[sharding] != "SHARDING_NONE":
        out["sharding"] = SHARDINGS[sharding]
    for key, field in (("offload_optimizer", "offloadOptimizer"),
                       ("offload_parameters", "offloadParameters"),
                       ("gradient_as_bucket_view", "gradientAsBucketView")):
        value = spec.get(key, False)
        if not isinstance(value, bool):
            raise DescribeError(f"parallelism.{key} must be True or False, got {value!r}")
        if value:
            out[field] = True
    unit = spec.get("largest_unit_bytes")
    if unit is None:
        unit = largest_unit_bytes(model, dtype)
    elif not isinstance(unit, int) or isinstance(unit, bool) or unit < 0:
        raise DescribeError(f"parallelism.largest_unit_bytes must be bytes >= 0, "
                            f"got {unit!r}")
    if unit:
        out["largestUnitBytes"] = int(unit)
    return out
