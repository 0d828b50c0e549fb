"""The software stack a process's context depends on (beside the GPU and its driver):
one reading for the describer, which records the job's (ModelDescription.stack), and
for gpuest-collect context, which measures a node's. The server matches the two."""
from __future__ import annotations

import os
from typing import Any, Dict


def _version(text: str) -> tuple:
    parts = []
    for piece in text.split("+")[0].split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def module_loading(torch_version: str = "", cuda: str = "") -> str:
    """CUDA_MODULE_LOADING as a PyTorch process has it: the variable where set; else
    LAZY, which PyTorch sets itself from 1.13 on CUDA 11.7 and later; older builds load
    every module eagerly (a context several times larger: docs/contexts.md)."""
    value = (os.environ.get("CUDA_MODULE_LOADING") or "").strip().upper()
    if value:
        return value
    old_torch = bool(torch_version) and _version(torch_version) < (1, 13)
    old_cuda = bool(cuda) and _version(cuda) < (11, 7)
    return "EAGER" if old_torch or old_cuda else "LAZY"


def software_stack(torch: Any) -> Dict[str, Any]:
    """{"torch", "cuda", "cuda_major", "module_loading"} of this process's torch; cuda
    is "" and cuda_major 0 for a CPU-only build (which cannot tell the job's CUDA)."""
    cuda = torch.version.cuda or ""
    return {"torch": torch.__version__.split("+")[0], "cuda": cuda,
            "cuda_major": int(cuda.split(".")[0]) if cuda else 0,
            "module_loading": module_loading(torch.__version__, cuda)}


def stack_json(stack: Dict[str, Any]) -> Dict[str, Any]:
    """The proto's SoftwareStack in protobuf's JSON mapping (zero values left out)."""
    d: Dict[str, Any] = {"moduleLoading": stack["module_loading"]}
    if stack["cuda_major"]:
        d["cudaMajor"] = stack["cuda_major"]
        d["cudaVersion"] = stack["cuda"]
    return d
