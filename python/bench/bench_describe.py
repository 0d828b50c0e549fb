"""How long describe() takes, with the allocation trace, on torchvision models.

The goal: ResNet-50 at batch 32 described, with trace, in 2 s or less on a 2-core
CPU machine. Reports the first call (cold: lazy imports and kernel registration) and
the median of the following ones.

    PYTHONPATH=python:build/python /usr/bin/python3 python/bench/bench_describe.py
    PYTHONPATH=python:build/python /usr/bin/python3 python/bench/bench_describe.py resnet18:64 vit_b_16:8
"""
from __future__ import annotations

import argparse
import statistics
import time


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="*", default=["resnet50:32"],
                   help="torchvision model names with a batch size, NAME:BATCH "
                        "(default: resnet50:32)")
    p.add_argument("--repeat", type=int, default=5, help="warm runs per model (default 5)")
    p.add_argument("--no-trace", dest="trace", action="store_false")
    p.add_argument("--amp", action="store_true", help="trace mixed precision (CUDA autocast)")
    args = p.parse_args()

    import torch
    import torchvision

    import gpuest
    from gpuest.describe import as_json_dict

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    for spec in args.models:
        name, _, batch = spec.partition(":")
        batch = int(batch or 32)
        model = getattr(torchvision.models, name)()
        runs = []
        for _ in range(args.repeat + 1):
            t = time.perf_counter()
            d = as_json_dict(gpuest.describe(model, input_shape=(3, 224, 224),
                                             batch_size=batch, trace=args.trace,
                                             amp=args.amp))
            runs.append(time.perf_counter() - t)
        trace = d.get("trace", {})
        print(f"{name:>14} b{batch:<4}{' amp' if args.amp else ''} cold {runs[0]:.2f} s  warm median "
              f"{statistics.median(runs[1:]):.2f} s (min {min(runs[1:]):.2f})  "
              f"{len(d.get('layers', []))} layers, {len(trace.get('sizeBytes', []))} "
              f"allocations{'' if trace else '  (' + d.get('traceUnavailableReason', '') + ')'}")


if __name__ == "__main__":
    main()
