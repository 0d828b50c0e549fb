"""Export dataset rows as ModelDescriptions for the trainer (JSON lines).

The Transformer sample has no layer list, so the trainer cannot read its layers from
the CSV: this rebuilds each row's model with the generator (on the meta device, no
memory, no compute) and describes it as a user's model would be described, so the
Transformer-based estimator learns from the same kind of sequence it is served.

    python3 -m gpuest.synthetic.export --csv transformer_sample.csv --out rows.jsonl

Each line: {"fileName", "description" (ModelDescription JSON; with --trace, the
allocation trace of one training step too),
"maxMemoryMib", "status", "matched"}. Rows the generator cannot build are counted
on stderr and left out.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys

from ..describe.api import describe_json
from .cnn import GeneratorCrash
from .rebuild import rebuild

MEMORY_COLUMNS = ("max_gpu_memory_mib", "Max GPU Memory (MiB)")


def export_rows(rows, optimizer="adam", trace=False):
    """Yields (record, None) per row, or (None, reason) for rows that cannot be built.

    With ``trace`` each description carries the allocation trace of one training step
    at the row's batch size (the allocator simulation is calibrated on these)."""
    for row in rows:
        name = row.get("filename") or row.get("Filename")
        try:
            model, shape, batch, extra = rebuild(None, row, device="meta")
        except (GeneratorCrash, ValueError) as e:
            yield None, f"{name}: {e}"
            continue
        d = describe_json(model, input_shape=shape, batch_size=batch, trace=trace,
                          optimizer=optimizer, name=name,
                          input_dtype="int64" if extra["sequence_length"] else None,
                          sequence_length=extra["sequence_length"] or None)
        if not trace:
            d.pop("traceUnavailableReason", None)
        # The measurements' cudnn.benchmark is not known: not recorded, rather than
        # this process's setting.
        d.pop("cudnnBenchmark", None)
        d["frameworkVersion"] = "2.4.1"  # what the measurements ran on
        memory = next(float(row[c]) for c in MEMORY_COLUMNS if c in row)
        yield {"fileName": name, "description": d, "maxMemoryMib": memory,
               "status": row.get("status") or row.get("Status") or "SUCCESSFUL",
               "matched": extra["matched"]}, None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m gpuest.synthetic.export",
        description="Rebuild and describe every row of a GPUMemNet CSV, as JSON lines.")
    parser.add_argument("--csv", required=True, help="dataset CSV (mlp, cnn or transformer)")
    parser.add_argument("--out", required=True, help="JSON-lines file to write")
    parser.add_argument("--limit", type=int, default=0, help="only the first N rows")
    parser.add_argument("--trace", action="store_true",
                        help="trace one training step of each row (slower)")
    args = parser.parse_args(argv)
    try:
        with open(args.csv, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        print(f"cannot read {args.csv}: {e}", file=sys.stderr)
        return 2
    if args.limit:
        rows = rows[:args.limit]
    written = skipped = 0
    with open(args.out, "w") as out:
        for record, reason in export_rows(rows, trace=args.trace):
            if record is None:
                skipped += 1
                print(f"skipped {reason}", file=sys.stderr)
                continue
            out.write(json.dumps(record, separators=(",", ":")) + "\n")
            written += 1
            if written % 200 == 0:
                print(f"{args.csv}: {written} rows", file=sys.stderr, flush=True)
    print(f"{args.csv}: wrote {written} rows to {args.out}, skipped {skipped}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
