"""How the layer rule (the analytic estimator: a step built from the layer list) compares
with the traced step (allocsim), row by row, against a running gpuest-server.

    ./build/server/gpuest-server --models models --listen=127.0.0.1:50991 --metrics-listen= &
    /usr/bin/python3 lab/calibration/layer_rule_study.py peaks \
        --target 127.0.0.1:50991 --rows build/datasets/timm_traced.jsonl
    /usr/bin/python3 lab/calibration/layer_rule_study.py safety \
        --target 127.0.0.1:50991 --rows build/datasets/cnn_traced.jsonl --without-inputs

``peaks``: per architecture group (the model name's leading letters, or GPUMemNet's
``arch:`` field), the layer rule's simulated reserved peak over the trace's, on the
completed rows (OK, or SPIKE for the timm rows). ``safety``: per architecture group,
the share of completed runs whose served layer-rule upper bound on the A100 40GB is at
or above the measured peak. The layers' inputs are as described, or removed
(``--without-inputs``), as a layer list from elsewhere would come. For studying what
the layer rule misses; the reported accuracy is docs/accuracy.md's, from
gpuest-calibrate-memory.
"""
from __future__ import annotations

import argparse
import collections
import json
import re
import sys

import grpc
from google.protobuf import json_format


def _architecture_group(row: dict) -> str:
    arch = re.search(r"arch:([a-z]+)", row["fileName"])
    return arch.group(1) if arch else re.match(r"[a-z]*", row.get("model", "")).group(0)


def _completed(row: dict) -> bool:
    return (row["status"] == "SUCCESSFUL" and row["maxMemoryMib"] > 0
            and row.get("measuredStatus", "OK") in ("OK", "SPIKE"))


def _quantiles(values):
    from gpuest.stats import quantile
    return " ".join(f"q{int(p * 100):02d} {quantile(values, p):.2f}" for p in (0.1, 0.5, 0.9))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=("peaks", "safety"))
    p.add_argument("--target", required=True)
    p.add_argument("--rows", required=True, help="exported rows (JSON lines) with traces")
    p.add_argument("--without-inputs", action="store_true",
                   help="drop the layers' input_activations first")
    args = p.parse_args(argv)
    from gpuest.v1 import EstimateRequest, EstimatorStub

    stub = EstimatorStub(grpc.insecure_channel(args.target))

    def estimate(row: dict, estimator: str, keep_trace: bool, inputs: bool = True):
        request = EstimateRequest(gpu="a100-40gb", estimators=[estimator])
        json_format.ParseDict(row["description"], request.model)
        if not keep_trace:
            request.model.ClearField("trace")
        if not inputs:
            for layer in request.model.layers:
                layer.input_activations = 0
        return stub.Estimate(request, timeout=60).results[0].memory

    by_group = collections.defaultdict(list)
    with open(args.rows) as f:
        for line in f:
            row = json.loads(line)
            if not _completed(row):
                continue
            if args.what == "peaks":
                traced = estimate(row, "allocsim", keep_trace=True).reserved_peak_bytes
                layers = estimate(row, "analytic", False,
                                  not args.without_inputs).reserved_peak_bytes
                by_group[_architecture_group(row)].append(layers / traced)
            else:
                bound = estimate(row, "analytic", False, not args.without_inputs).upper_bytes
                by_group[_architecture_group(row)].append(
                    bound >= row["maxMemoryMib"] * 2**20)
    every = [v for values in by_group.values() for v in values]
    for name, values in sorted(by_group.items()) + [("all", every)]:
        if args.what == "peaks":
            print(f"{name:14} {len(values):5}  layer rule / trace: {_quantiles(values)}")
        else:
            print(f"{name:14} {len(values):5}  safe {sum(values) / len(values):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
