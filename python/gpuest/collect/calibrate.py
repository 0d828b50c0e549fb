"""A GPU's context constant in models/gpu_profiles.json, from collected rows.

``context_mib`` is the memory a training process holds outside PyTorch's caching
allocator (CUDA context, cuDNN/cuBLAS handles, loaded kernels). The A100's figure is
fitted by gpuest-calibrate-memory as measured minus simulated peak, because GPUMemNet
recorded only nvidia-smi. The collector records both sides of it on every row: the
process's peak as nvidia-smi shows it and ``torch.cuda.max_memory_reserved``. Their
difference is the context, measured; its median over the successful rows becomes
the GPU's ``context_mib``, and its constants turn from "assumed" to "calibrated".
"""
from __future__ import annotations

import os
import shutil
import statistics
import subprocess
from typing import List, Tuple


class CalibrationError(ValueError):
    pass


def context_residuals(rows: List[dict]) -> Tuple[str, List[float]]:
    """(GPU name, nvidia-smi process peak - torch reserved peak per OK row), from the
    rows of measurements.csv."""
    ok = [r for r in rows if r.get("status") == "OK"]
    names = {r.get("gpu_name") for r in ok}
    if len(names) != 1:
        raise CalibrationError(f"rows of one GPU are needed, got OK rows of "
                               f"{sorted(map(str, names)) or 'none'}")
    residuals = [float(r["smi_process_mib"]) - float(r["torch_max_reserved_mib"])
                 for r in ok if r.get("smi_process_mib") and r.get("torch_max_reserved_mib")]
    if not residuals:
        raise CalibrationError("no OK row has both nvidia-smi's process peak and "
                               "torch's reserved peak (smi_process_mib is empty where "
                               "nvidia-smi cannot see the process: run the collector "
                               "with the host's PID namespace)")
    return names.pop(), residuals


SET_CONTEXT_TOOL = "gpuest-set-gpu-context"
# Where the project's build puts it, for a checkout that has not installed it.
_BUILT_TOOL = os.path.join("build", "lab", "calibration", SET_CONTEXT_TOOL)


def set_context_tool() -> str:
    """The one writer of gpu_profiles.json (GpuProfilesManifest, C++):
    $GPUEST_SET_GPU_CONTEXT, else on PATH, else in ./build."""
    tool = (os.environ.get("GPUEST_SET_GPU_CONTEXT") or shutil.which(SET_CONTEXT_TOOL)
            or (_BUILT_TOOL if os.access(_BUILT_TOOL, os.X_OK) else None))
    if not tool:
        raise CalibrationError(f"{SET_CONTEXT_TOOL} is needed to write the profiles: "
                               "build the project (deploy/build.sh) or set "
                               "GPUEST_SET_GPU_CONTEXT to it")
    return tool


def calibrate_context(rows: List[dict], profiles_path: str, gpu_id: str,
                      source: str) -> dict:
    """Sets ``gpu_id``'s context in ``profiles_path`` (through gpuest-set-gpu-context,
    which checks the GPU's id and name and keeps the rest of the file); returns what it
    set."""
    name, residuals = context_residuals(rows)
    context = round(statistics.median(residuals))
    spread = (min(residuals), max(residuals))
    basis = (f"median of nvidia-smi's process peak - torch.cuda.max_memory_reserved "
             f"over {len(residuals)} successful training runs measured on this GPU by "
             f"gpuest-collect ({source}; range {spread[0]:.0f}..{spread[1]:.0f} MiB)")
    done = subprocess.run([set_context_tool(), f"--profiles={profiles_path}",
                           f"--gpu={gpu_id}", f"--measured-on={name}",
                           f"--context-mib={context}", f"--basis={basis}"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise CalibrationError(done.stderr.strip().removeprefix(f"{SET_CONTEXT_TOOL}: "))
    return {"gpu": gpu_id, "name": name, "context_mib": context, "rows": len(residuals),
            "min_mib": spread[0], "max_mib": spread[1]}
