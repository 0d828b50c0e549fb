"""Measured GPU rows against gpuest's estimates of the same jobs, as a Markdown table.

Rows are measure_cudnn_benchmark.py's (timm) or measure_llm_finetune.py's (decoders);
each is estimated from its description through a running gpuest-server with the CLI:

    python3 lab/gpu/compare_with_estimates.py --rows data/X/rows.jsonl \
        --descriptions build/datasets/timm_traced.jsonl --gpu h200 \
        --target 127.0.0.1:50051 [--only-off]

``--descriptions``: a JSON-lines file of {"fileName": "model@batch", "description"}
(lab/data/describe_timm.py) or a directory of MODEL_CONFIG_bB_sS.json files
(measure_llm_finetune.py --describe-dir). The measured requirement is the larger of
the first and the steady reserved peak plus the GPU's context (what nvidia-smi shows
for the job); the allocated peak compares with the trace's simulated one.

``--group-out-bound``: what a bound fitted on these rows themselves would do, each
architecture group (the model name's leading letters) scored by a fit that never saw
it: context + k x the simulated reserved peak (cuBLAS workspaces included), k the 95th
percentile of measured / simulated over the other architecture groups, per model family (CNN,
transformer). An analysis of the rows, not what the server serves.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
from gpuest import stats  # noqa: E402  (the project's one quantile)

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


def estimate_response(cli, target, gpu, description, estimators="allocsim"):
    """The CLI's --json answer for one description on one GPU."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        if isinstance(description, str):
            f.write(open(description).read())
        else:
            json.dump(description, f)
        path = f.name
    try:
        out = subprocess.run([cli, f"--target={target}", f"--gpu={gpu}",
                              f"--estimators={estimators}", "estimate", path, "--json"],
                             capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(path)
    return json.loads(out)


def estimate(cli, target, gpu, description):
    return estimate_response(cli, target, gpu, description)["results"][0]["memory"]


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
    p.add_argument("--against-csv", default="",
                   help="../shared/data/timm/timm_a100.csv: how its OK rows of the same "
                        "jobs compare with these rows plus --against-context-mib")
    p.add_argument("--against-context-mib", type=float, default=1429.0)
    p.add_argument("--write-caps", default="",
                   help="with --group-out-bound: write each job's group-out cap (MiB)")
    p.add_argument("--verdict-gpus", default="",
                   help="catalog ids (l4,a100-40gb,...): gpuest's fits / does-not-fit on "
                        "each, against whether the measured reserved peak plus "
                        "--context-mib is within the card (a proxy: not a run there)")
    p.add_argument("--group-out-bound", action="store_true",
                   help="also score a bound fitted on the rows, architecture group out")
    args = p.parse_args(argv)
    descriptions = load_descriptions(args.descriptions)
    print("| job | allocated: sim / measured MiB | reserved: sim / measured MiB | "
          "requirement (upper) | measured + context | upper / measured |")
    print("|---|---|---|---|---|---|")
    ratios, alloc_err, reserved_err, missing = [], [], [], []
    scored = []  # (job, model family, simulated reserved, measured reserved)
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
        family = (descriptions[key] if isinstance(descriptions[key], dict)
                  else json.load(open(descriptions[key]))).get("family", "")
        alloc = max(row["first_allocated_mib"], row["steady_allocated_mib"])
        reserved = max(row["first_reserved_mib"], row["steady_reserved_mib"])
        sim_alloc = int(m["allocatedPeakBytes"]) / MIB
        sim_reserved = int(m["reservedPeakBytes"]) / MIB
        upper = int(m["upperBytes"]) / MIB
        need = reserved + args.context_mib
        ratios.append(upper / need)
        scored.append((key, family, sim_reserved, reserved))
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
    if args.verdict_gpus:
        verdicts(args, descriptions, scored)
    if args.group_out_bound:
        group_out_bound(scored, args.context_mib, caps_path=args.write_caps)
    if args.against_csv:
        against(scored, args.against_csv, args.against_context_mib)
    if missing:
        print(f"no description for: {', '.join(missing)}", file=sys.stderr)
    return 0


def verdicts(args, descriptions, scored):
    """gpuest's verdict for each job on each of --verdict-gpus against the proxy."""
    gpus = [g for g in args.verdict_gpus.split(",") if g]
    right = total = 0
    wrong = []
    for gpu in gpus:
        for job, _, _, measured in scored:
            fit = estimate_response(args.cli, args.target, gpu,
                                    descriptions[job])["recommendation"]
            capacity = int(fit["fit"]["capacityBytes"]) / MIB
            need = measured + args.context_mib
            fits, truth = fit["fit"]["fits"], need <= capacity
            total += 1
            right += fits == truth
            if fits != truth:
                wrong.append(f"{job} on {gpu}: gpuest says {'fits' if fits else 'no'} "
                             f"({int(fit['memoryBytes']) / MIB:,.0f} MiB), "
                             f"measured + context {need:,.0f} of {capacity:,.0f}")
    print(f"\nverdicts on {', '.join(gpus)}: right on {right} of {total} "
          f"({right / total:.3f}) against measured reserved + {args.context_mib:.0f} MiB")
    for w in wrong:
        print(f"- {w}")


def against(scored, path, context_mib):
    import csv
    other = {f"{r['model']}@{r['batch_size']}": float(r["max_gpu_memory_mib"])
             for r in csv.DictReader(open(path)) if r["status"] == "OK"}
    ratios = sorted(other[job] / (measured + context_mib)
                    for job, _, _, measured in scored if job in other)
    if not ratios:
        return
    at = [ratios[int(q * (len(ratios) - 1))] for q in (0, 0.05, 0.25, 0.5, 0.75, 0.95, 1)]
    print(f"\n{os.path.basename(path)}: {len(ratios)} OK rows of the same jobs; their "
          f"measured peak / (this reserved peak + {context_mib:.0f} MiB): min {at[0]:.2f}, "
          f"5 % {at[1]:.2f}, 25 % {at[2]:.2f}, median {at[3]:.2f}, 75 % {at[4]:.2f}, "
          f"95 % {at[5]:.2f}, max {at[6]:.2f}")


def group_out_bound(scored, context_mib, quantile=0.95, caps_path=""):
    """Prints the table; with caps_path, writes {job: k x simulated reserved MiB} for
    every row, k fitted without the row's architecture group: the allocator's share of
    the bound, a cap for measure_cudnn_benchmark.py --cap-file."""
    caps = {}
    def k_for(rows):
        return stats.quantile([measured / sim for _, _, sim, measured in rows], quantile)

    def architecture(job):
        return re.match(r"[a-z]+", job).group(0)

    print("\n| model family | rows | architecture groups | safe | safe and within 1.2x "
          "| k fitted on all of them |")
    print("|---|---|---|---|---|---|")
    for family in sorted({f for _, f, _, _ in scored}):
        rows = [r for r in scored if r[1] == family]
        archs = sorted({architecture(r[0]) for r in rows})
        safe = tight = 0
        for arch in archs:
            k = k_for([r for r in rows if architecture(r[0]) != arch])
            for job, _, sim, measured in rows:
                if architecture(job) != arch:
                    continue
                bound = context_mib + k * sim
                caps[job] = round(k * sim, 1)
                need = measured + context_mib
                safe += bound >= need
                tight += need <= bound <= 1.2 * need
        print(f"| {family} | {len(rows)} | {len(archs)} | {safe / len(rows):.3f} | "
              f"{tight / len(rows):.3f} | {k_for(rows):.3f} |")
    if caps_path:
        with open(caps_path, "w") as f:
            json.dump(caps, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
