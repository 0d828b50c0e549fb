"""The software stack a process's context depends on (beside the GPU and its driver):
one reading for the describer, which records the job's (ModelDescription.stack), and
for gpuest-collect context, which measures a node's. The server matches the two."""
from __future__ import annotations

import os
from typing import Any, Dict


def module_loading() -> str:
    """CUDA_MODULE_LOADING as a PyTorch process has it: PyTorch sets LAZY when the
    variable is unset (c10/cuda/CUDAFunctions.cpp, since 2.0)."""
    return (os.environ.get("CUDA_MODULE_LOADING") or "LAZY").strip().upper()


def software_stack(torch: Any) -> Dict[str, Any]:
    """{"torch", "cuda", "cuda_major", "module_loading"} of this process's torch; cuda
    is "" and cuda_major 0 for a CPU-only build (which cannot tell the job's CUDA)."""
    cuda = torch.version.cuda or ""
    return {"torch": torch.__version__.split("+")[0], "cuda": cuda,
            "cuda_major": int(cuda.split(".")[0]) if cuda else 0,
            "module_loading": module_loading()}


def stack_json(stack: Dict[str, Any]) -> Dict[str, Any]:
    """The proto's SoftwareStack in protobuf's JSON mapping (zero values left out)."""
    d: Dict[str, Any] = {"moduleLoading": stack["module_loading"]}
    if stack["cuda_major"]:
        d["cudaMajor"] = stack["cuda_major"]
        d["cudaVersion"] = stack["cuda"]
    return d
