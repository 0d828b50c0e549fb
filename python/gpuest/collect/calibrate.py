"""A GPU's context constant in models/gpu_profiles.json, from collected rows.

``context_mib`` is the memory a training process holds outside PyTorch's caching
allocator (CUDA context, cuDNN/cuBLAS handles, loaded kernels). The A100's figure is
fitted by gpuest-validate-memory as measured minus simulated peak, because GPUMemNet
recorded only nvidia-smi. The collector records both sides of it on every row: the
process's peak as nvidia-smi shows it and ``torch.cuda.max_memory_reserved``. Their
difference is the context, measured; its median over the successful rows becomes
the GPU's ``context_mib``, and its constants turn from "assumed" to "calibrated".
"""
from __future__ import annotations

import json
import os
import statistics
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


def calibrate_context(rows: List[dict], profiles_path: str, gpu_id: str,
                      source: str) -> dict:
    """Rewrites ``gpu_id``'s context in ``profiles_path``; returns what it set."""
    name, residuals = context_residuals(rows)
    with open(profiles_path) as f:
        profiles = json.load(f)
    matches = [g for g in profiles["gpus"] if g["id"] == gpu_id]
    if not matches:
        raise CalibrationError(f"--gpu {gpu_id}: not in {profiles_path} (ids: "
                               f"{', '.join(g['id'] for g in profiles['gpus'])})")
    gpu = matches[0]
    if gpu["name"] != name:
        raise CalibrationError(f"--gpu {gpu_id} is {gpu['name']!r} in {profiles_path}, but "
                               f"the rows were measured on {name!r}")
    context = round(statistics.median(residuals))
    spread = (min(residuals), max(residuals))
    gpu["context_mib"] = context
    gpu["constants"] = "calibrated"
    kept = gpu["constants_basis"].split("; cuBLAS workspace:", 1)
    workspace = ("; cuBLAS workspace:" + kept[1]) if len(kept) == 2 else ""
    gpu["constants_basis"] = (
        f"context: median of nvidia-smi's process peak - torch.cuda.max_memory_reserved "
        f"over {len(residuals)} successful training runs measured on this GPU by "
        f"gpuest-collect ({source}; range {spread[0]:.0f}..{spread[1]:.0f} MiB)"
        + workspace)
    text = json.dumps(profiles, indent=2, ensure_ascii=False) + "\n"
    with open(profiles_path + ".tmp", "w") as f:
        f.write(text)
    os.replace(profiles_path + ".tmp", profiles_path)
    return {"gpu": gpu_id, "name": name, "context_mib": context, "rows": len(residuals),
            "min_mib": spread[0], "max_mib": spread[1]}
