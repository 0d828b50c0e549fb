"""Give the layers of already traced rows their inputs (Layer.input_activations,
Layer.input_from and Layer.input_op) from a layers-only description of the same rows, without tracing
again.

    /usr/bin/python3 lab/data/merge_layer_inputs.py \
        --traced build/datasets/cnn_traced.jsonl --layers cnn_layers.jsonl \
        --out build/datasets/cnn_traced.jsonl.merged

Traces take most of an export (and the shipped timm rows were traced on a GPU
machine's torch 2.11); a layer list takes seconds. Rows are matched by fileName and
layers by position, each checked to have the same name, type, output and parameters:
a row whose layer lists differ in any of these keeps its layers as they are and is
counted, so a merge never pairs a layer with another layer's input.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Dict, List, Tuple

_SAME = ("name", "type", "outputActivations", "parameters")


def merged_layers(traced: List[dict], described: List[dict]) -> Tuple[List[dict], bool]:
    """(traced's layers with described's inputActivations, inputFrom and inputOp, whether they
    matched)."""
    if len(traced) != len(described):
        return traced, False
    if any(t.get(k) != d.get(k) for t, d in zip(traced, described) for k in _SAME):
        return traced, False
    out = []
    for t, d in zip(traced, described):
        layer = dict(t)
        if d.get("inputActivations"):
            layer["inputActivations"] = d["inputActivations"]
        if "inputFrom" in d:  # 0 is a layer: present or not, never falsy-skipped
            layer["inputFrom"] = d["inputFrom"]
        if d.get("inputOp"):
            layer["inputOp"] = d["inputOp"]
        out.append(layer)
    return out, True


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--traced", required=True, help="rows with traces (JSON lines)")
    p.add_argument("--layers", required=True, help="the same rows described without")
    p.add_argument("--out", required=True)
    p.add_argument("--by-model", action="store_true",
                   help="match rows by model, not by fileName: a layer list per model "
                        "serves each of its batch sizes (inputs and sources are per "
                        "sample; the lists are still checked to agree layer by layer)")
    args = p.parse_args(argv)
    key = "model" if args.by_model else "fileName"

    layers: Dict[str, List[dict]] = {}
    with open(args.layers) as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                layers.setdefault(row[key], row["description"].get("layers", []))
    rows = matched = 0
    unmatched: List[str] = []
    with open(args.traced) as f, open(args.out, "w") as out:
        for line in f:
            if not line.strip():
                continue
            row = json.loads(line)
            rows += 1
            described = layers.get(row.get(key, ""))
            ok = False
            if described is not None:
                row["description"]["layers"], ok = merged_layers(
                    row["description"].get("layers", []), described)
            matched += ok
            if not ok:
                unmatched.append(row["fileName"])
            out.write(json.dumps(row, separators=(",", ":")) + "\n")
    print(f"{matched} of {rows} rows have their layers' inputs; "
          f"{len(unmatched)} keep their layers as they were"
          + (f" (first: {', '.join(unmatched[:5])})" if unmatched else ""),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
