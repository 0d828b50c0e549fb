"""The child process that runs one job (``python3 -m gpuest.collect.child``).

It builds the model, describes it (``gpuest.describe``, trace included, on fake tensors
on the CPU), then trains it for the job's steps or seconds and reads PyTorch's own
peak memory figures. What it has is written to the result file after each stage
(describe, then measure), so a crash in training still leaves the description, and the
collector turns a child that died into a row with its status. The run is on CUDA, or
with ``--dry-run`` on the CPU (one step, nothing measured on a GPU).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

from .plan import Job

MIB = 1 << 20
# The child's exit status when the node, not the job, is at fault (no CUDA for PyTorch):
# the collector stops instead of filing every job as a failed row.
NODE_UNUSABLE = 3


def write_result(path: str, result: dict) -> None:
    """Atomically: the collector never reads half a result."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, separators=(",", ":"))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def is_out_of_memory(e: BaseException) -> bool:
    """CUDA's out of memory (torch.cuda.OutOfMemoryError on 2.x, a RuntimeError on
    1.13) and the CPU allocator's failure (a dry run under a memory limit)."""
    text = str(e)
    return (type(e).__name__ == "OutOfMemoryError" or "out of memory" in text
            or "can't allocate memory" in text or isinstance(e, MemoryError))


def versions(device) -> dict:
    import torch
    out = {"torch": torch.__version__, "cuda": torch.version.cuda or "",
           "cudnn": str(torch.backends.cudnn.version() or "")}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        out["gpu_name_torch"] = props.name
        out["gpu_capability"] = f"{props.major}.{props.minor}"
    return out


def describe_job(job: Job, model, shape, kwargs) -> dict:
    """The job's description in its JSON form (no generated modules needed)."""
    from ..describe.api import describe_json
    return describe_json(model, input_shape=shape, batch_size=job.batch_size,
                         optimizer=job.optimizer, dtype="float32",
                         amp=job.precision == "amp", name=job.model, loss=job.loss,
                         **kwargs)


def make_optimizer(name: str, params):
    """torch.optim's optimizer for describe's optimizer names (foreach where torch
    offers it, as describe traces it)."""
    import torch
    lr = 1e-3
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr)
    if name == "sgd_momentum":
        return torch.optim.SGD(params, lr=lr, momentum=0.9)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=1e-2)
    if name == "rmsprop":
        return torch.optim.RMSprop(params, lr=lr)
    if name == "adagrad":
        return torch.optim.Adagrad(params, lr=lr)
    raise ValueError(f"unknown optimizer {name!r}")


def make_batch(job: Job, model, shape, device):
    """Random inputs as the job's dataloader would give them: float images or features,
    or token ids below the vocabulary of the model's first embedding."""
    import torch
    size = (job.batch_size, *shape)
    if job.input_dtype != "int64":
        return torch.randn(size, device=device)
    embeddings = [m for m in model.modules() if isinstance(m, torch.nn.Embedding)]
    if not embeddings:
        raise ValueError("int64 inputs, but the model has no nn.Embedding to size the "
                         "token ids by")
    return torch.randint(0, embeddings[0].num_embeddings, size, device=device)


def train(job: Job, model, shape, device, dry_run: bool, measuring_marker: str) -> dict:
    """Warm-up steps, then the measured steps (or seconds); PyTorch's own peaks."""
    import torch

    from ..describe.losses import training_loss
    amp = job.precision == "amp"
    cuda = device.type == "cuda"
    model = model.to(device).train()
    optimizer = make_optimizer(job.optimizer, model.parameters())
    scaler = None
    if amp and cuda:  # torch.amp's on 2.3+ (torch.cuda.amp's is deprecated there)
        scaler = (torch.amp.GradScaler("cuda") if hasattr(torch.amp, "GradScaler")
                  else torch.cuda.amp.GradScaler())
    # Autocast as the job runs it: float16 on CUDA; the CPU's bfloat16 in a dry run.
    autocast_dtype = torch.float16 if cuda else torch.bfloat16
    batch = make_batch(job, model, shape, device)

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=autocast_dtype, enabled=amp):
            out = model(batch)
            labels = None
            first = out if isinstance(out, torch.Tensor) else None
            if first is not None and first.dim() == 2 and first.shape[1] > 1:
                labels = torch.randint(0, first.shape[1], (job.batch_size,), device=device)

            def make_target(target_shape, dtype):
                if dtype.is_floating_point:
                    return torch.randn(target_shape, dtype=dtype, device=device)
                classes = out.shape[-1] if out.dim() == 3 else out.shape[1]
                return torch.randint(0, classes, target_shape, device=device)

            loss, _ = training_loss(job.loss, out, labels, make_target)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    warmup, steps = (0, 1) if dry_run else (job.warmup_steps, job.steps)
    for _ in range(warmup):
        step()
    sync()
    open(measuring_marker, "w").close()
    started = time.perf_counter()
    done = 0
    try:
        while done < steps:
            step()
            done += 1
            if job.seconds and not dry_run:
                sync()
                if time.perf_counter() - started >= job.seconds:
                    break
        sync()
    finally:
        os.remove(measuring_marker)
    elapsed = time.perf_counter() - started
    out = {"measured_steps": done, "measured_seconds": round(elapsed, 6),
           "step_ms": round(1000 * elapsed / max(done, 1), 3),
           "samples_per_s": round(done * job.batch_size / elapsed, 3) if elapsed else None}
    if cuda:
        out["torch_max_reserved_mib"] = torch.cuda.max_memory_reserved(device) / MIB
        out["torch_max_allocated_mib"] = torch.cuda.max_memory_allocated(device) / MIB
    return out


def run(job: Job, result_path: str, dry_run: bool) -> int:
    import torch
    torch.manual_seed(0)
    if not dry_run:
        if not torch.cuda.is_available():
            print(f"PyTorch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA "
                  f"device here", file=sys.stderr)
            return NODE_UNUSABLE
        torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    result: dict = {"stage": "start", "pid": os.getpid()}
    write_result(result_path, result)
    from . import zoo
    try:
        model, shape, kwargs = zoo.build(job, device="cpu")
    except Exception as e:  # noqa: BLE001 - the job's row says why
        result.update(stage="build", status="ERROR", error=_error(e))
        write_result(result_path, result)
        return 0
    result["input_shape"] = list(shape)
    started = time.perf_counter()
    try:
        result["description"] = describe_job(job, model, shape, kwargs)
    except Exception as e:  # noqa: BLE001 - measured anyway, without a description
        result["describe_error"] = _error(e)
    result["describe_seconds"] = round(time.perf_counter() - started, 3)
    device = torch.device("cpu" if dry_run else "cuda")
    result.update(stage="described", versions=versions(device))
    write_result(result_path, result)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = bool(result.get("description", {})
                                              .get("cudnnBenchmark", False))
        torch.cuda.reset_peak_memory_stats(device)
    try:
        result["measurement"] = train(job, model, shape, device, dry_run,
                                      result_path + ".measuring")
        result["status"] = "DRY_RUN" if dry_run else "OK"
    except Exception as e:  # noqa: BLE001 - OOM is a measurement; anything else a status
        result["status"] = "OOM" if is_out_of_memory(e) else "ERROR"
        result["error"] = _error(e)
        if device.type == "cuda":  # what it held when it failed
            result["measurement"] = {
                "torch_max_reserved_mib": torch.cuda.max_memory_reserved(device) / MIB,
                "torch_max_allocated_mib": torch.cuda.max_memory_allocated(device) / MIB}
    result["stage"] = "done"
    write_result(result_path, result)
    return 0


def _error(e: BaseException) -> str:
    lines = traceback.format_exception_only(type(e), e)
    return "".join(lines).strip()[:1000]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m gpuest.collect.child",
                                description="Runs one collector job (the collector "
                                            "starts it; not for direct use).")
    p.add_argument("--job", required=True, help="the job as JSON")
    p.add_argument("--result", required=True, help="where to write the result JSON")
    p.add_argument("--dry-run", action="store_true")
    args = p.parse_args(argv)
    return run(Job.from_json(json.loads(args.job)), args.result, args.dry_run)


if __name__ == "__main__":
    sys.exit(main())
