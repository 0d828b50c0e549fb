"""gpuest-describe (or python3 -m gpuest.describe): write a model's ModelDescription
as JSON."""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from typing import List, Optional

EPILOG = """\
The JSON is protobuf's JSON mapping of gpuest.v1.ModelDescription
(proto/gpuest/v1/model.proto). Nothing runs on a GPU: the training step (forward,
loss, backward, one optimizer step, whose state and temporaries are emulated) runs
on fake tensors, so a large batch size costs no memory or compute here. Where the
step cannot be traced, the description still carries the layers (from a forward of
2 real samples on the CPU if even a fake forward fails) and says why in
traceUnavailableReason.

example:
  gpuest-describe --model torchvision.models:resnet50 \\
      --input-shape 3,224,224 --batch-size 32 -o resnet50.json
(gpuest-describe is python3 -m gpuest.describe, installed with the package.)
exit status: 0 on success, 2 on bad arguments or a model that cannot be loaded."""


def _prog() -> str:
    """The name the user typed: the console script's, or python3 -m gpuest.describe."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return "python3 -m gpuest.describe" if name in ("", "__main__.py", "-c") else name


def _parallelism(args: argparse.Namespace):
    """The parallelism the flags give, or None (one GPU)."""
    if not (args.data_parallel or args.tensor_parallel or args.offload_optimizer
            or args.sharding != "none"):
        return None
    return {"data_parallel": args.data_parallel, "sharding": args.sharding,
            "tensor_parallel": args.tensor_parallel,
            "offload_optimizer": args.offload_optimizer}


def _parser() -> argparse.ArgumentParser:
    from .losses import LOSSES
    from .optim import IMPLEMENTATIONS, OPTIMIZERS
    from .parallelism import SHARDINGS
    from .step import DTYPES
    p = argparse.ArgumentParser(
        prog=_prog(),
        description="Describe a PyTorch model (layer sequence and the allocation trace "
                    "of one training step) for the gpuest estimator service.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, metavar="MODULE:FACTORY",
                   help="importable callable that returns a torch.nn.Module, e.g. "
                        "torchvision.models:resnet50 or mypkg.nets:MyNet")
    p.add_argument("--kwargs", default="{}", metavar="JSON",
                   help="keyword arguments for the factory, as a JSON object "
                        "(default: {})")
    p.add_argument("--input-shape", required=True, metavar="D1,D2,...",
                   help="input shape of one sample, without the batch dimension, "
                        "e.g. 3,224,224, or 512 for token ids (with --input-dtype int64)")
    p.add_argument("--input-dtype", default=None, metavar="DTYPE",
                   help="dtype of the input: int64 (or int32, bool) for token ids; "
                        "default: float, in the parameters' dtype")
    p.add_argument("--batch-size", required=True, type=int, metavar="N",
                   help="training batch size to trace at")
    p.add_argument("--optimizer", default="adamw", choices=OPTIMIZERS,
                   help="optimizer whose state the step creates (default: adamw)")
    p.add_argument("--dtype", default="float32", choices=list(DTYPES),
                   help="parameter dtype (default: float32)")
    p.add_argument("--amp", nargs="?", const="float16", default=None,
                   choices=["float16", "bfloat16"],
                   help="mixed precision training (torch.autocast on CUDA): traced with "
                        "CUDA autocast's op lists and weight-cast cache over the --dtype "
                        "weights; float16 (the default with --amp) with a GradScaler's "
                        "state, bfloat16 without one")
    p.add_argument("--optimizer-impl", default="foreach", choices=list(IMPLEMENTATIONS),
                   help="how torch.optim runs the step: foreach (default; torch 2.x's on "
                        "CUDA, one temporary per parameter at once), fused (fused=True: "
                        "none) or single_tensor (foreach=False: one at a time)")
    p.add_argument("--gradient-accumulation", type=int, default=1, metavar="N",
                   help="micro-batches of --batch-size whose gradients add up before one "
                        "optimizer step (default 1); above 1 the trace runs two, the "
                        "second beside the first's gradients")
    p.add_argument("--loss", default="auto", choices=LOSSES,
                   help="the loss the traced step computes on the output: auto "
                        "(default: cross_entropy for a (batch, classes) output, else "
                        "mean), cross_entropy (per token for a (batch, seq, vocab) "
                        "output, as a language model trains; classes on dim 1 "
                        "otherwise), mse (against a target shaped like the output) or "
                        "mean (output.mean(), no target); the description names it")
    p.add_argument("--cudnn-benchmark", default=None, action=argparse.BooleanOptionalAction,
                   help="whether the job sets torch.backends.cudnn.benchmark = True "
                        "(recorded for the estimate; default: on if the model's "
                        "module or factory turned it on, else not recorded, and the "
                        "server treats a model with convolutions as benchmarking, as "
                        "timm's train.py and torchvision's reference scripts do)")
    p.add_argument("--data-parallel", type=int, default=0, metavar="N",
                   help="GPUs the job runs on (data-parallel world size); the server's "
                        "estimate is then per GPU (--batch-size is per GPU)")
    p.add_argument("--sharding", default="none", choices=sorted(SHARDINGS),
                   help="with --data-parallel: what is divided over the GPUs (ZeRO "
                        "stages, FSDP strategies)")
    p.add_argument("--tensor-parallel", type=int, default=0, metavar="N",
                   help="tensor-parallel degree (Megatron)")
    p.add_argument("--offload-optimizer", action="store_true",
                   help="the optimizer state lives in host memory")
    p.add_argument("--no-trace", dest="trace", action="store_false",
                   help="layer sequence only, no allocation trace")
    p.add_argument("--name", default=None, help="model name (default: its class name)")
    p.add_argument("--alloc-conf", default=None, metavar="CONF",
                   help="the job's PYTORCH_CUDA_ALLOC_CONF, e.g. expandable_segments:True "
                        "(default: this environment's); max_split_size_mb and "
                        "expandable_segments reach the allocator simulation")
    p.add_argument("-o", "--output", default="-", metavar="FILE",
                   help="where to write the JSON (default: standard output)")
    return p


def _load_factory(p, spec):
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        p.error(f"--model must look like MODULE:FACTORY, got {spec!r}")
    try:
        obj = importlib.import_module(module_name)
    except Exception as e:
        p.error(f"cannot import module {module_name!r}: {e}")
    for part in attr.split("."):
        if not hasattr(obj, part):
            p.error(f"module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        p.error(f"{spec!r} is not callable")
    return obj


def main(argv: Optional[List[str]] = None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    try:
        kwargs = json.loads(args.kwargs)
    except json.JSONDecodeError as e:
        p.error(f"--kwargs is not valid JSON: {e}")
    if not isinstance(kwargs, dict):
        p.error("--kwargs must be a JSON object")
    try:
        shape = [int(x) for x in args.input_shape.replace("x", ",").split(",") if x.strip()]
    except ValueError:
        p.error(f"--input-shape must be comma-separated integers, got {args.input_shape!r}")
    if not shape or any(x <= 0 for x in shape):
        p.error(f"--input-shape must be positive integers, got {args.input_shape!r}")
    if args.batch_size <= 0:
        p.error(f"--batch-size must be positive, got {args.batch_size}")

    import torch.nn as nn  # after argument checks: --help stays quick
    from .api import DescribeError, describe
    from .message import as_json_dict

    factory = _load_factory(p, args.model)
    try:
        model = factory(**kwargs)
    except Exception as e:
        p.error(f"{args.model}(**{kwargs}) failed: {type(e).__name__}: {e}")
    if not isinstance(model, nn.Module):
        p.error(f"{args.model} returned {type(model).__name__}, not a torch.nn.Module")

    started = time.perf_counter()
    try:
        desc = describe(model, input_shape=shape, batch_size=args.batch_size,
                        optimizer=args.optimizer, dtype=args.dtype, amp=args.amp or False,
                        gradient_accumulation=args.gradient_accumulation,
                        optimizer_impl=args.optimizer_impl,
                        trace=args.trace, input_dtype=args.input_dtype, name=args.name,
                        alloc_conf=args.alloc_conf, loss=args.loss,
                        cudnn_benchmark=args.cudnn_benchmark,
                        parallelism=_parallelism(args))
    except DescribeError as e:
        p.error(str(e))
    d = as_json_dict(desc)
    text = json.dumps(d, separators=(",", ":")) + "\n"
    if args.output == "-":
        sys.stdout.write(text)
    else:
        try:
            with open(args.output, "w") as f:
                f.write(text)
        except OSError as e:
            p.error(f"cannot write {args.output}: {e}")
        trace = d.get("trace")
        note = (f"{len(trace.get('sizeBytes', []))} allocations traced" if trace is not None
                else f"no trace ({d.get('traceUnavailableReason', '')})")
        print(f"{args.output}: {len(d.get('layers', []))} layers, {note}, "
              f"{time.perf_counter() - started:.2f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
