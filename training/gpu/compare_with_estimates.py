"""Measured GPU rows against gpuest's estimates of the same jobs, as a Markdown table.

Rows are measure_cudnn_benchmark.py's (timm) or measure_llm_finetune.py's (decoders);
each is estimated from its description through a running gpuest-server with the CLI:

    python3 training/gpu/compare_with_estimates.py --rows data/X/rows.jsonl \
        --descriptions build/datasets/timm_traced.jsonl --gpu h200 \
        --target 127.0.0.1:50051 [--only-off]

``--descriptions``: a JSON-lines file of {"fileName": "model@batch", "description"}
(training/data/describe_timm.py) or a directory of MODEL_CONFIG_bB_sS.json files
(measure_llm_finetune.py --describe-dir). The measured requirement is the larger of
the first and the steady reserved peak plus the GPU's context (what nvidia-smi shows
for the job); the allocated peak compares with the trace's simulated one.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

MIB = 1 << 20


def load_descriptions(source):
    if os.path.isdir(source):
        return {name[:-5]: os.path.join(source, name) for name in os.listdir(source)
                if name.endswith(".json")}
    found = {}
    for line in open(source):
        r = json.loads(line)
        found[r["fileName"]] = r["description"]
    return found


def row_key(row):
    if "config" in row:
        return f"{row['model']}_{row['config']}_b{row['batch_size']}_s{row['seq_len']}"
    return f"{row['model']}@{row['batch_size']}"


def estimate(cli, target, gpu, description):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        if isinstance(description, str):
            f.write(open(description).read())
        else:
            json.dump(description, f)
        path = f.name
    try:
        out = subprocess.run([cli, f"--target={target}", f"--gpu={gpu}",
                              "--estimators=allocsim", "estimate", path, "--json"],
                             capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(path)
    return json.loads(out)["results"][0]["memory"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", required=True)
    p.add_argument("--descriptions", required=True)
    p.add_argument("--gpu", default="h200")
    p.add_argument("--context-mib", type=float, default=775.0,
                   help="the GPU's memory outside the allocator (H200: 775, measured)")
    p.add_argument("--target", default="127.0.0.1:50051")
    p.add_argument("--cli", default="build/client/gpuest")
    p.add_argument("--only-off", action="store_true",
                   help="timm rows with cuDNN benchmark off and no cap only")
    args = p.parse_args(argv)
    descriptions = load_descriptions(args.descriptions)
    print("| job | allocated: sim / measured MiB | reserved: sim / measured MiB | "
          "requirement (upper) | measured + context | upper / measured |")
    print("|---|---|---|---|---|---|")
    ratios, alloc_err, reserved_err, missing = [], [], [], []
    for line in open(args.rows):
        row = json.loads(line)
        if row.get("status") != "OK":
            continue
        if args.only_off and (row.get("cudnn_benchmark") or row.get("cap_mib")):
            continue
        key = row_key(row)
        if key not in descriptions:
            missing.append(key)
            continue
        m = estimate(args.cli, args.target, args.gpu, descriptions[key])
        alloc = max(row["first_allocated_mib"], row["steady_allocated_mib"])
        reserved = max(row["first_reserved_mib"], row["steady_reserved_mib"])
        sim_alloc = int(m["allocatedPeakBytes"]) / MIB
        sim_reserved = int(m["reservedPeakBytes"]) / MIB
        upper = int(m["upperBytes"]) / MIB
        need = reserved + args.context_mib
        ratios.append(upper / need)
        alloc_err.append(sim_alloc / alloc - 1)
        reserved_err.append(sim_reserved / reserved - 1)
        print(f"| {key} | {sim_alloc:,.0f} / {alloc:,.0f} ({100 * alloc_err[-1]:+.1f} %) | "
              f"{sim_reserved:,.0f} / {reserved:,.0f} ({100 * reserved_err[-1]:+.1f} %) | "
              f"{upper:,.0f} | {need:,.0f} | {upper / need:.2f}x |")
    n = len(ratios)
    if not n:
        print("no rows", file=sys.stderr)
        return 1
    safe = sum(r >= 1 for r in ratios)
    tight = sum(1 <= r <= 1.2 for r in ratios)
    print(f"\n{n} rows: requirement safe on {safe} ({safe / n:.3f}), safe and within 1.2x on "
          f"{tight} ({tight / n:.3f}); upper / measured median {statistics.median(ratios):.2f}x"
          f" (min {min(ratios):.2f}, max {max(ratios):.2f}); allocated error median "
          f"{100 * statistics.median(alloc_err):+.1f} %, mean |error| "
          f"{100 * statistics.mean(abs(e) for e in alloc_err):.1f} %; reserved error median "
          f"{100 * statistics.median(reserved_err):+.1f} %, mean |error| "
          f"{100 * statistics.mean(abs(e) for e in reserved_err):.1f} %")
    if missing:
        print(f"no description for: {', '.join(missing)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
