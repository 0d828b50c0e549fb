"""The project's clean GPU runs as the exporter's JSON lines, for
gpuest-calibrate-memory --gpu-runs GPU=FILE (lab/calibration/clean_runs.h).

    /usr/bin/python3 lab/data/export_clean_runs.py --gpu h200 \
        --runs data/h200-benchmark-off/cudnn_benchmark_off.jsonl \
        --descriptions build/datasets/timm_traced.jsonl \
        --out build/datasets/h200_clean_runs.jsonl

A clean run is a row of lab/gpu/measure_cudnn_benchmark.py with cuDNN benchmark
mode off, no cap and status OK: its peak is the training step's, with no search
transient in it. Each is paired with the traced description of the same model at the
same batch (describe_timm.py's rows); a run without one is counted and left out.
maxMemoryMib is the allocator's reserved peak (the larger of the first step's and the
steady state's) plus the process's context: the run's own (`context_mib`, NVML's
per-process figure less the reserved bytes, where the run recorded it) or else the
GPU's from models/gpu_profiles.json: what the process used, nvidia-smi's scale, as the
other datasets' peaks are. (With several processes on the card at once, the runs' NVML
device columns hold the whole device, so the allocator's own peak is the job's.)

Decoder fine-tunes (lab/gpu/measure_llm_finetune.py rows) are exported the same
way with --llm-descriptions DIR: each run's description is DIR/<model>_<config>_b<batch>
_s<seq>.json, as that script writes them.
"""
from __future__ import annotations

import argparse
import json
import os
import sys


def gpu_context_mib(profiles_path: str, gpu: str) -> float:
    """The GPU's measured context; refuses an assumed one (the peaks would carry it)."""
    with open(profiles_path) as f:
        profiles = json.load(f)
    for g in profiles["gpus"]:
        if g["id"] == gpu:
            if g.get("constants") != "calibrated":
                raise SystemExit(f"{gpu}'s context in {profiles_path} is assumed, not "
                                 "measured: measure it first (gpuest-collect calibrate)")
            return float(g["context_mib"])
    raise SystemExit(f"{gpu} is not in {profiles_path}")


def clean(run: dict) -> bool:
    return (run.get("status") == "OK" and run.get("cudnn_benchmark") is False
            and run.get("cap_mib") is None)


def run_stack(torch_version: str) -> dict:
    """The stack a run's torch ("2.11.0+cu130") ran on, as ModelDescription.stack: the
    measurement scripts leave CUDA_MODULE_LOADING unset, so PyTorch's lazy loading."""
    stack = {"moduleLoading": "LAZY"}
    _, _, local = torch_version.partition("+")
    if local.startswith("cu") and local[2:].isdigit() and len(local) >= 4:
        digits = local[2:]
        stack.update(cudaMajor=int(digits[:-1]), cudaVersion=f"{digits[:-1]}.{digits[-1]}")
    return stack


def exported(run: dict, row: dict, context_mib: float) -> dict:
    reserved = max(run["first_reserved_mib"], run["steady_reserved_mib"])
    description = dict(row["description"], cudnnBenchmark=False)  # As the run was.
    if run.get("torch"):  # The stack it ran on, not the describing machine's.
        description.update(frameworkVersion=run["torch"].split("+")[0],
                           stack=run_stack(run["torch"]))
    context = run.get("context_mib", context_mib)
    return {"fileName": row["fileName"], "model": row["model"],
            "description": description,
            "maxMemoryMib": round(reserved + context, 3),
            "status": "SUCCESSFUL", "measuredStatus": "OK"}


def llm_rows(paths, directory: str):
    """(run, described row) of each completed decoder fine-tune with a description."""
    for path in paths:
        with open(path) as f:
            for line in f:
                run = json.loads(line) if line.strip() else {}
                if run.get("status") != "OK":
                    continue
                name = (f"{run['model']}_{run['config']}_b{run['batch_size']}"
                        f"_s{run['seq_len']}")
                description = os.path.join(directory, name + ".json")
                if not os.path.exists(description):
                    print(f"{name}: no description in {directory}; left out",
                          file=sys.stderr)
                    continue
                with open(description) as d:
                    yield run, {"fileName": name, "model": run["model"],
                                "description": json.load(d)}


def clean_runs(paths) -> dict:
    """The clean runs of the files, by (model, batch); a later run of the same wins."""
    wanted = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                if line.strip():
                    run = json.loads(line)
                    if clean(run):
                        wanted[(run["model"], int(run["batch_size"]))] = run
    return wanted


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gpu", required=True, help="the runs' GPU, its profile id (h200)")
    p.add_argument("--runs", required=True, action="append",
                   help="measure_cudnn_benchmark.py rows (JSON lines); repeatable")
    p.add_argument("--descriptions", action="append",
                   help="traced rows of the same models (describe_timm.py's JSON lines); "
                        "repeatable: a run takes the first file's row that traced it")
    p.add_argument("--llm-descriptions", metavar="DIR",
                   help="the runs are decoder fine-tunes described in DIR "
                        "(measure_llm_finetune.py --describe-dir)")
    p.add_argument("--profiles", default="models/gpu_profiles.json")
    p.add_argument("--models-csv", action="store_true",
                   help="write the clean runs' models as describe_timm.py's --csv (one "
                        "row per model and batch) to --out, for tracing them, and stop")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)

    if args.models_csv:
        wanted = clean_runs(args.runs)
        with open(args.out, "w") as out:
            out.write("model,input_size,batch_size,max_gpu_memory_mib,status,faketensor_mib\n")
            for (model, batch), run in sorted(wanted.items()):
                out.write(f"{model},{run['input_size']},{batch},"
                          f"{run['steady_reserved_mib']},OK,\n")
        print(f"{len(wanted)} clean runs' models written to {args.out}", file=sys.stderr)
        return 0 if wanted else 1
    context_mib = gpu_context_mib(args.profiles, args.gpu)
    if args.llm_descriptions:
        written = 0
        with open(args.out, "w") as out:
            for run, row in llm_rows(args.runs, args.llm_descriptions):
                run = dict(run, cudnn_benchmark=False)
                out.write(json.dumps(exported(run, row, context_mib)) + "\n")
                written += 1
        print(f"{written} fine-tunes on the {args.gpu} written to {args.out}",
              file=sys.stderr)
        return 0 if written else 1
    if not args.descriptions:
        p.error("--descriptions is required (or --llm-descriptions)")
    wanted = clean_runs(args.runs)
    written = 0
    with open(args.out, "w") as out:
        for path in args.descriptions:
            with open(path) as f:
                for line in f:
                    if not line.strip():
                        continue
                    row = json.loads(line)
                    key = (row["model"], int(row["description"]["batchSize"]))
                    if key in wanted and row["description"].get("trace"):
                        run = wanted.pop(key)
                        out.write(json.dumps(exported(run, row, context_mib)) + "\n")
                        written += 1
    print(f"{written} clean runs on the {args.gpu} written to {args.out}; "
          f"{len(wanted)} without a traced description left out", file=sys.stderr)
    return 0 if written else 1


if __name__ == "__main__":
    sys.exit(main())
