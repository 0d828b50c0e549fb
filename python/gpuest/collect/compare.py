"""The same jobs on two GPUs: a run's measurements.csv beside a measured CSV of the
shared datasets' schema (``../shared/data/timm/timm_a100.csv``), matched on model and
batch size (fp32 rows only: the shared data is fp32). What an identical job needs on
the new card over what it needed on the reference, and the jobs whose fate changed
(out of memory on one card, not on the other)."""
from __future__ import annotations

import statistics
from typing import Dict, List, Tuple

from .clean import read_table
from ..stats import quantile


class CompareError(ValueError):
    pass


def compare(measurements_csv: str, reference_csv: str) -> str:
    """A short report (text) of ``measurements_csv`` against ``reference_csv``."""
    ours = [r for r in read_table(measurements_csv) if r.get("precision", "fp32") == "fp32"]
    reference: Dict[Tuple[str, str], dict] = {
        (r["model"], r["batch_size"]): r for r in read_table(reference_csv)}
    pairs = [(r, reference[(r["model"], r["batch_size"])]) for r in ours
             if (r["model"], r["batch_size"]) in reference]
    if not pairs:
        raise CompareError(f"no fp32 row of {measurements_csv} has a model and batch size "
                           f"of {reference_csv}")
    both_ok = [(r, ref) for r, ref in pairs if r["status"] == "OK" and ref["status"] == "OK"
               and r["max_gpu_memory_mib"] and float(ref["max_gpu_memory_mib"]) > 0]
    ratios = [float(r["max_gpu_memory_mib"]) / float(ref["max_gpu_memory_mib"])
              for r, ref in both_ok]
    differences = [float(r["max_gpu_memory_mib"]) - float(ref["max_gpu_memory_mib"])
                   for r, ref in both_ok]
    flips = [(r, ref) for r, ref in pairs
             if (r["status"] == "OOM") != (ref["status"] == "OOM")
             and r["status"] in ("OK", "OOM")]
    gpu = ours[0].get("gpu_name") or "?"
    lines = [f"{measurements_csv} ({gpu}) against {reference_csv}: {len(pairs)} fp32 rows "
             f"of {len({r['model'] for r, _ in pairs})} models matched on model and batch "
             f"size"]
    if ratios:
        lines.append(
            f"both OK: {len(ratios)} rows; peak here / reference: median "
            f"{statistics.median(ratios):.3f} (10% {quantile(ratios, 0.1):.3f}, 90% "
            f"{quantile(ratios, 0.9):.3f}); difference: median "
            f"{statistics.median(differences):+.0f} MiB")
    else:
        lines.append("both OK: no rows")
    lines.append(f"out of memory on one card only: {len(flips)} rows")
    for r, ref in flips:
        lines.append(f"  {r['model']} @ {r['batch_size']}: {r['status']} here, "
                     f"{ref['status']} there")
    return "\n".join(lines) + "\n"
