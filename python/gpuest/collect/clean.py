"""The collected rows as the project's datasets are read.

- ``measurements.csv``: one row per job, the timm dataset's columns first
  (``../shared/data/timm/timm_a100.csv``: model, input_size, batch_size,
  max_gpu_memory_mib, status, faketensor_mib), so a new GPU's rows line up with the
  A100's, then what the collector adds (``NEW_COLUMNS``).
- ``colocation.csv``: one row per pair, Lucid's colocation.csv columns first
  (``../shared/data/lucid/colocation.csv``), then the jobs' ids and the card.
- ``exported.jsonl``: the measured rows with their traced descriptions, in the shape
  of ``gpuest.synthetic.export`` (fileName, description, maxMemoryMib, status,
  model, fakeTensorMib), which ``lab/data`` reads: ``gpuest-calibrate-memory
  --timm-rows`` and ``gpuest-replay-dump --jsonl`` take it as they take the timm export.

``max_gpu_memory_mib`` is what the A100 data holds: the process's peak as nvidia-smi
shows it (CUDA context included), or where nvidia-smi showed no process (a container
without the host's PID namespace), the card's peak use above what it held before the
job. ``faketensor_mib`` is the peak of the description's FakeTensor trace (gpuest's
own trace of one step), beside which the timm file put PyTorch's FakeTensor estimate.
"""
from __future__ import annotations

import csv
import json
import os
from collections import Counter
from typing import Iterable, List, Optional

SHARED_COLUMNS = ("model", "input_size", "batch_size", "max_gpu_memory_mib", "status",
                  "faketensor_mib")
NEW_COLUMNS = (
    "job_id", "source", "optimizer", "precision", "loss",
    "smi_process_mib", "smi_device_mib", "torch_max_reserved_mib",
    "torch_max_allocated_mib", "measured_steps", "step_ms", "samples_per_s",
    "gpu_util", "gmem_util", "smact", "smocc", "drama", "utilization_source",
    "gpu_name", "gpu_memory_mib", "driver", "cuda", "cudnn", "torch",
    "layers", "trace_allocations", "describe_error", "error")
COLUMNS = SHARED_COLUMNS + NEW_COLUMNS

LUCID_COLUMNS = ("model1", "dataset1", "batchsize1", "amp1", "speed1", "model2", "dataset2",
                 "batchsize2", "amp2", "speed2", "gpu_util", "gmem_util")
PAIR_COLUMNS = LUCID_COLUMNS + ("status", "job_id1", "job_id2", "gpu_name", "driver",
                                "torch", "error")

# A row's status (../shared/data/README.md, timm section) -> the exporter's status
# (lab/data/exported_rows.cc reads OOM_CRASH, and the row's own status as
# measuredStatus). SPIKE rows completed (their peak holds a benchmark-mode transient);
# CRASHED rows say nothing about the job: the calibration decides what each is for. The
# collector's own rows are OK, SPIKE or OOM; the timm export (describe_timm.py) has all.
EXPORT_STATUS = {"OK": "SUCCESSFUL", "SPIKE": "SUCCESSFUL", "OOM": "OOM_CRASH",
                 "OOM_INFERRED": "OOM_CRASH", "CRASHED": "CRASHED"}

# A completed run whose peak is not a requirement (../shared/data/README.md, timm
# section, the same rules): above the completed peak of a *larger* batch of the same
# job by more than 2 % and 64 MiB (memory needed cannot fall as the batch grows), or an
# interior batch more than 1.15 x the straight line between its neighbours + 256 MiB.
# The usual cause is cuDNN benchmark mode's search, sized by the free memory.
SPIKE_ABOVE_LARGER = (1.02, 64.0)
SPIKE_ABOVE_LINE = (1.15, 256.0)


class TableError(ValueError):
    """A CSV that cannot be read."""


def read_table(path: str) -> List[dict]:
    """The rows of a CSV (a cleaned measurements.csv, a shared dataset) as dicts."""
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except OSError as e:
        raise TableError(f"cannot read {path}: {e}") from None


def trace_peak_mib(trace: Optional[dict]) -> Optional[float]:
    """Peak live bytes of a description's allocation trace, in MiB."""
    if not trace or not trace.get("sizeBytes"):
        return None
    events = []
    for size, at, free in zip(trace["sizeBytes"], trace["allocAt"], trace["freeAt"]):
        events.append((int(at), int(size)))
        if int(free):
            events.append((int(free), -int(size)))
    live = peak = 0
    for _, delta in sorted(events):
        live += delta
        peak = max(peak, live)
    return peak / (1 << 20)


def peak_mib(row: dict) -> Optional[float]:
    """The row's nvidia-smi peak (the datasets' max_gpu_memory_mib)."""
    m = row.get("measurement") or {}
    return m.get("smi_process_mib") or m.get("smi_device_mib")


def spikes(jobs: List[dict]) -> set:
    """The ids of completed job rows whose peak holds a transient (SPIKE_* above):
    compared within one job (model, source, optimizer, precision, input, GPU) across
    batch sizes."""
    groups: dict = {}
    for r in jobs:
        peak = peak_mib(r)
        if r.get("status") != "OK" or not peak:
            continue
        j = r["job"]
        key = (j["model"], j["source"], j["optimizer"], j["precision"],
               tuple(r.get("input_shape") or ()), r.get("gpu_name"))
        groups.setdefault(key, []).append((int(j["batch_size"]), float(peak), r["id"]))
    out = set()
    for runs in groups.values():
        runs.sort()
        for i, (batch, peak, rid) in enumerate(runs):
            factor, margin = SPIKE_ABOVE_LARGER
            if any(b > batch and peak > p * factor and peak - p > margin
                   for b, p, _ in runs[i + 1:]):
                out.add(rid)
                continue
            if 0 < i < len(runs) - 1:
                (b0, p0, _), (b1, p1, _) = runs[i - 1], runs[i + 1]
                line = p0 + (p1 - p0) * (batch - b0) / (b1 - b0)
                factor, margin = SPIKE_ABOVE_LINE
                if peak > line * factor + margin:
                    out.add(rid)
    return out


def _fmt(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):  # 3 places, no trailing zeros: 40309, 12.346
        return f"{value:.3f}".rstrip("0").rstrip(".")
    return str(value)


def measurement_row(row: dict, spiked: frozenset = frozenset()) -> dict:
    """The row in measurements.csv; its status is SPIKE when its id is in ``spiked``."""
    job, m, v = row["job"], row.get("measurement") or {}, row.get("versions") or {}
    d = row.get("description") or {}
    shape = row.get("input_shape") or []
    return {
        "model": job["model"], "input_size": "x".join(str(x) for x in shape),
        "batch_size": job["batch_size"], "max_gpu_memory_mib": peak_mib(row),
        "status": "SPIKE" if row["id"] in spiked else row["status"],
        "faketensor_mib": trace_peak_mib(d.get("trace")),
        "job_id": row["id"], "source": job["source"], "optimizer": job["optimizer"],
        "precision": job["precision"], "loss": d.get("loss") or job["loss"],
        **{k: m.get(k) for k in ("smi_process_mib", "smi_device_mib",
                                 "torch_max_reserved_mib", "torch_max_allocated_mib",
                                 "measured_steps", "step_ms", "samples_per_s",
                                 "gpu_util", "gmem_util", "smact", "smocc", "drama")},
        "utilization_source": m.get("utilization_source", "") if m.get(
            "utilization_samples") else "",
        "gpu_name": row.get("gpu_name"), "gpu_memory_mib": row.get("gpu_memory_mib"),
        "driver": row.get("driver"), "cuda": v.get("cuda"), "cudnn": v.get("cudnn"),
        "torch": v.get("torch"), "layers": len(d.get("layers", [])) if d else None,
        "trace_allocations": len(d["trace"]["sizeBytes"]) if d.get("trace") else None,
        "describe_error": row.get("describe_error") or d.get("traceUnavailableReason", ""),
        "error": row.get("error", ""),
    }


def pair_row(row: dict) -> dict:
    a, b = row["jobs"]
    s1, s2 = row["speeds"]
    return {
        "model1": a["model"], "dataset1": "random", "batchsize1": a["batch_size"],
        "amp1": int(a["precision"] == "amp"), "speed1": s1,
        "model2": b["model"], "dataset2": "random", "batchsize2": b["batch_size"],
        "amp2": int(b["precision"] == "amp"), "speed2": s2,
        "gpu_util": row.get("gpu_util"), "gmem_util": row.get("gmem_util"),
        "status": row["status"], "job_id1": a["id"], "job_id2": b["id"],
        "gpu_name": row.get("gpu_name"), "driver": row.get("driver"),
        "torch": (row.get("versions") or {}).get("torch"), "error": row.get("error", ""),
    }


def export_record(row: dict, spiked: frozenset = frozenset()) -> Optional[dict]:
    """The exporter's line for a measured row with a description; None otherwise (a
    dry run, a crash: nothing measured to calibrate on). A row in ``spiked`` keeps its
    measurement, marked SPIKE: the calibration reports it apart, never fits it."""
    memory = peak_mib(row)
    if row["status"] not in EXPORT_STATUS or not row.get("description") or memory is None:
        return None
    status = "SPIKE" if row["id"] in spiked else row["status"]
    d = row["description"]
    return {"fileName": row["id"], "model": row["job"]["model"], "description": d,
            "maxMemoryMib": memory, "status": EXPORT_STATUS[status],
            "measuredStatus": status,
            "fakeTensorMib": trace_peak_mib(d.get("trace")) or 0.0}


def _write_csv(path: str, columns, rows: Iterable[dict]) -> int:
    tmp = path + ".tmp"
    n = 0
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(columns)
        for r in rows:
            w.writerow([_fmt(r[c]) for c in columns])
            n += 1
    os.replace(tmp, path)
    return n


def summary(rows: List[dict]) -> str:
    """What data/<gpu>/README.md states about a run: the stack it ran on (every value
    seen, so a driver change mid-run shows) and its rows by status and kind."""
    jobs = [r for r in rows if r.get("kind") == "job"]
    pairs = [r for r in rows if r.get("kind") == "pair"]

    def seen(get):
        values = Counter(str(get(r) or "?") for r in rows)
        return ", ".join(f"{v} ({n} rows)" if len(values) > 1 else v
                         for v, n in sorted(values.items()))

    def counts(items):
        return ", ".join(f"{k} {n}" for k, n in sorted(Counter(items).items())) or "none"

    lines = [
        f"- GPU: {seen(lambda r: r.get('gpu_name'))}"
        f" ({seen(lambda r: _fmt(r.get('gpu_memory_mib')))} MiB)",
        f"- driver {seen(lambda r: r.get('driver'))}; CUDA "
        f"{seen(lambda r: (r.get('versions') or {}).get('cuda'))}; cuDNN "
        f"{seen(lambda r: (r.get('versions') or {}).get('cudnn'))}; PyTorch "
        f"{seen(lambda r: (r.get('versions') or {}).get('torch'))}",
        f"- {len(jobs)} jobs: {counts(r['status'] for r in jobs)}",
        f"- by source: {counts(r['job']['source'] for r in jobs)}; by precision: "
        f"{counts(r['job']['precision'] for r in jobs)}",
        f"- {len(pairs)} pairs: {counts(r['status'] for r in pairs)}",
    ]
    return "\n".join(lines) + "\n"


def clean(rows: List[dict], out_dir: str) -> dict:
    """Writes measurements.csv, colocation.csv (when there are pairs), exported.jsonl
    and summary.md into ``out_dir``; returns how many rows each file has."""
    jobs = [r for r in rows if r.get("kind") == "job"]
    pairs = [r for r in rows if r.get("kind") == "pair"]
    spiked = frozenset(spikes(jobs))
    counts = {"measurements.csv": _write_csv(
        os.path.join(out_dir, "measurements.csv"), COLUMNS,
        (measurement_row(r, spiked) for r in jobs))}
    if pairs:
        counts["colocation.csv"] = _write_csv(os.path.join(out_dir, "colocation.csv"),
                                              PAIR_COLUMNS, map(pair_row, pairs))
    path = os.path.join(out_dir, "exported.jsonl")
    exported = [e for e in (export_record(r, spiked) for r in jobs) if e is not None]
    with open(path + ".tmp", "w") as f:
        for e in exported:
            f.write(json.dumps(e, separators=(",", ":")) + "\n")
    os.replace(path + ".tmp", path)
    counts["exported.jsonl"] = len(exported)
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write(summary(rows))
    return counts
