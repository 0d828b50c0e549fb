"""Describe every row of the timm measurements (shared/data/timm/timm_a100.csv) with a
traced training step, as JSON lines for calibrating and validating the memory
estimators on real architectures.

    PYTHONPATH=python:<timm source> /usr/bin/python3 lab/data/describe_timm.py \
        --csv ../shared/data/timm/timm_a100.csv --out build/datasets/timm_traced.jsonl

The runs were fp32 with SGD with momentum at timm's default input size (the CSV's
README), so each row is described that way, at its own batch size, with torch 2.x's
fused attention provided on torch 1.13 (gpuest.describe.fused_attention). Each line has the
exporter's shape (gpuest.synthetic.export): {"fileName": "<model>@<batch>",
"description", "maxMemoryMib", "status" ("SUCCESSFUL" or "OOM_CRASH"), "model",
"fakeTensorMib"}. A model's larger batch sizes are extrapolated from the traces of its
two smallest where every allocation is affine in the batch (see extrapolate). Resumable: rows already in --out are skipped, so a killed run loses
at most the model it was on. A model that timm cannot build is reported and skipped.
"""
from __future__ import annotations

import argparse
import csv
import gc
import json
import os
import re
import sys
import time
from collections import OrderedDict



def _done(path):
    seen = set()
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    seen.add(json.loads(line)["fileName"])
                except (ValueError, KeyError):
                    pass  # a line cut by a kill: described again
    return seen


def extrapolate(small, large, batch):
    """The description at ``batch`` from two traced at smaller batch sizes, when the
    two steps made the same allocations in the same order and every size is affine in
    the batch size (exactly, in whole bytes); None otherwise (trace it directly).
    Tracing costs the same at any batch size, so this saves most of the export."""
    ts, tl = small.get("trace"), large.get("trace")
    if ts is None or tl is None:
        return None
    b1, b2 = small["batchSize"], large["batchSize"]
    if any(ts[k] != tl[k] for k in ("allocAt", "freeAt", "category")):
        return None
    sizes = []
    for s1, s2 in zip(ts["sizeBytes"], tl["sizeBytes"]):
        s1, s2 = int(s1), int(s2)
        step, rest = divmod((s2 - s1) * (batch - b1), b2 - b1)
        if rest or (s2 - s1) % (b2 - b1):
            return None
        sizes.append(s1 + step)
    d = json.loads(json.dumps(large))
    d["batchSize"] = batch
    d["trace"]["sizeBytes"] = sizes
    d["trace"]["batchSize"] = batch
    d["trace"]["tracer"] += f" (sizes extrapolated from batch {b1} and {b2})"
    return d


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--csv", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--models", default="", help="comma-separated subset of models")
    p.add_argument("--shard", default="0/1", metavar="K/N",
                   help="describe only every N-th model from the K-th (for N processes)")
    p.add_argument("--layers-only", action="store_true",
                   help="describe the layers without a trace (seconds a model), for "
                        "lab/data/merge_layer_inputs.py to give traced rows")
    p.add_argument("--one-row-per-model", action="store_true",
                   help="describe each model's first row only (with --layers-only: the "
                        "layer list is per sample, the same at every batch; "
                        "merge_layer_inputs.py --by-model gives it to each row)")
    args = p.parse_args(argv)

    import torch

    from gpuest.collect.clean import EXPORT_STATUS
    from gpuest.collect.zoo import import_timm
    from gpuest.describe.api import describe_json

    # The runs were on torch 2.4.1, where timm's attention takes the fused path:
    # import_timm gives 1.13 that function before timm looks for it at import.
    timm = import_timm()

    torch.set_num_threads(1)
    by_model = OrderedDict()
    with open(args.csv, newline="") as f:
        for row in csv.DictReader(f):
            by_model.setdefault(row["model"], []).append(row)
    if args.one_row_per_model:
        by_model = OrderedDict((m, rows[:1]) for m, rows in by_model.items())
    if args.models:
        wanted = set(args.models.split(","))
        by_model = OrderedDict((m, r) for m, r in by_model.items() if m in wanted)
    # One model of each architecture group (the name's leading letters) in turn, so
    # that a partial export already covers every architecture group.
    groups = OrderedDict()
    for m in by_model:
        groups.setdefault(re.match(r"[a-z]*", m).group(0), []).append(m)
    rank = {m: (i, g) for g, (_, members) in enumerate(groups.items())
            for i, m in enumerate(members)}
    by_model = OrderedDict((m, by_model[m]) for m in sorted(by_model, key=rank.get))
    k, n = (int(x) for x in args.shard.split("/"))
    by_model = OrderedDict((m, r) for i, (m, r) in enumerate(by_model.items()) if i % n == k)
    done = _done(args.out)
    todo = [(m, [r for r in rows if f"{m}@{r['batch_size']}" not in done])
            for m, rows in by_model.items()]
    todo = [(m, rows) for m, rows in todo if rows]
    print(f"{len(done)} rows already described; {sum(len(r) for _, r in todo)} rows "
          f"of {len(todo)} models to go", file=sys.stderr, flush=True)
    failed = 0
    with open(args.out, "a") as out:
        for i, (name, rows) in enumerate(todo, 1):
            started = time.perf_counter()
            try:
                model = timm.create_model(name, pretrained=False)
            except Exception as e:  # noqa: BLE001 - reported, the run goes on
                failed += 1
                print(f"[{i}/{len(todo)}] {name}: cannot build: {type(e).__name__}: {e}",
                      file=sys.stderr, flush=True)
                continue
            model.train()
            rows = sorted(rows, key=lambda r: int(r["batch_size"]))
            shape = [int(x) for x in rows[0]["input_size"].split("x")]
            traced = {}  # batch -> description, traced directly

            def trace_at(batch):
                if batch not in traced:
                    traced[batch] = describe_json(
                        model, input_shape=shape, batch_size=batch,
                        optimizer="sgd_momentum", name=name, trace=not args.layers_only)
                return traced[batch]

            # Larger batches are extrapolated from the two smallest. Without a trace each
            # batch is described as it is: a layer's count per sample of a tensor
            # without a batch dimension (Swin V2's position bias MLP) depends on it.
            smallest = (int(rows[0]["batch_size"]), int(rows[1]["batch_size"])) \
                if len(rows) > 2 and not args.layers_only else ()
            for row in rows:
                batch = int(row["batch_size"])
                d = None
                if smallest and batch not in smallest:
                    d = extrapolate(trace_at(smallest[0]), trace_at(smallest[1]), batch)
                if d is None:
                    d = trace_at(batch)
                d = dict(d, frameworkVersion="2.4.1")  # what the measurements ran on
                record = {"fileName": f"{name}@{batch}", "model": name,
                          "description": d,
                          "maxMemoryMib": float(row["max_gpu_memory_mib"]),
                          "status": EXPORT_STATUS[row["status"]],
                          "measuredStatus": row["status"],
                          "fakeTensorMib": float(row["faketensor_mib"] or 0)}
                out.write(json.dumps(record, separators=(",", ":")) + "\n")
                out.flush()
            print(f"[{i}/{len(todo)}] {name}: {len(rows)} rows, {len(traced)} traced, "
                  f"{'' if 'trace' in d else 'NO TRACE: ' + d.get('traceUnavailableReason', '')}"
                  f", {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
            del model
            gc.collect()
    print(f"done; {failed} models could not be built", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
