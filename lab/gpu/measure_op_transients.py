"""Measure, on a real GPU, what each operation of a training step holds only while it
runs: cuDNN's convolution workspaces in heuristic mode (benchmark off), attention's
and reductions' scratch buffers, copies a kernel makes of a non-contiguous input. A
trace made on fake tensors cannot see them, and the simulated reserved peak of clean
H200 runs sits a median 3.6 % under the measured one while the allocated peak is within
1 % (data/h200-benchmark-off/README.md): this is the measurement a model of them per
operation needs (issue "requirement", deliverable 4).

For each (model, batch), in a fresh process: timm's fp32 SGD-with-momentum step with
cuDNN benchmark mode off, once to warm up (lazily loaded kernels, the heuristics'
choices, the optimizer's state), then once more under OpTransients, which runs every
aten operation (forward, backward and optimizer) between two reads of the caching
allocator's counters:

    inside = max_memory_allocated() during the op - memory_allocated() before it
             - the bytes of the new storage it returns

that is, what the op allocated and freed before returning. reserved_growth is the
segments the allocator added for it (cudaMalloc), which is how an inside allocation
fragments the cache. One JSON line per call that held something inside, and per
convolution call even when it held nothing (the model needs the zeros too):

    python3 lab/gpu/measure_op_transients.py --jobs resnet50@32,vit_small_patch16_224@64 \\
        --out data/h200-op-transients/op_transients.jsonl

Rows: model, batch, phase (forward, backward, optimizer), op (aten name), call (its
index in the step), tensors ([shape, dtype] of each tensor argument, in order), conv
(stride, padding, dilation, transposed, groups, for convolutions), inside_bytes,
reserved_growth_bytes, out_bytes. A last row per job, op "step", holds the step's
max_memory_allocated and max_memory_reserved without the per-op resets (the warm-up
step's figures).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from lease import add_lease_arguments, until_deadline

MIB = 1 << 20
# The aten convolutions whose workspaces cuDNN sizes by the algorithm it picks.
CONVOLUTIONS = ("convolution", "convolution_backward", "cudnn_convolution",
                "cudnn_convolution_transpose")


def _tensors(value):
    """The tensors in an op's arguments or results, nested lists included."""
    import torch
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)


def _storage_key(t):
    try:
        return t.untyped_storage().data_ptr()
    except (AttributeError, RuntimeError):  # torch 1.13 names it storage().
        return t.storage().data_ptr()


def _storage_bytes(t) -> int:
    try:
        return t.untyped_storage().nbytes()
    except (AttributeError, RuntimeError):
        return t.storage().nbytes()


def new_storage_bytes(args, outputs) -> int:
    """Bytes of the storages the results hold that no argument held: what the op
    returned as new memory (an in-place op's or a view's result adds nothing)."""
    held = {_storage_key(t) for t in _tensors(args)}
    seen, total = set(), 0
    for t in _tensors(outputs):
        key = _storage_key(t)
        if key in held or key in seen:
            continue
        seen.add(key)
        total += _storage_bytes(t)
    return total


def describe_call(op_name: str, args) -> dict:
    """What a row says of a call: its tensors' shapes and dtypes, and for a
    convolution its geometry, from aten's signatures:
    convolution(input, weight, bias, stride, padding, dilation, transposed,
    output_padding, groups) and convolution_backward(grad_output, input, weight,
    bias_sizes, stride, padding, dilation, transposed, output_padding, groups, mask)."""
    row = {"tensors": [[list(t.shape), str(t.dtype).replace("torch.", "")]
                       for t in _tensors(args)]}
    base = op_name.split(".")[0]
    if base == "convolution" and len(args) >= 9:
        row["conv"] = {"stride": list(args[3]), "padding": list(args[4]),
                       "dilation": list(args[5]), "transposed": bool(args[6]),
                       "groups": int(args[8])}
    elif base == "convolution_backward" and len(args) >= 10:
        row["conv"] = {"stride": list(args[4]), "padding": list(args[5]),
                       "dilation": list(args[6]), "transposed": bool(args[7]),
                       "groups": int(args[9])}
    return row


def inside_bytes(allocated_before: int, peak_during: int, returned: int) -> int:
    """What the op held only while it ran; never below 0 (an op that freed an argument's
    memory, such as the optimizer's foreach ops, returns less than it started with)."""
    return max(0, peak_during - allocated_before - returned)


def make_op_transients(counters, phase_of):
    """A TorchDispatchMode that measures every op with counters (the caching allocator's:
    allocated(), reserved(), reset_peak(), peak()) and keeps a row per call worth
    keeping; phase_of() names the step's phase at the call."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class OpTransients(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.rows = []
            self.calls = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            before, reserved_before = counters.allocated(), counters.reserved()
            counters.reset_peak()
            out = func(*args, **kwargs)
            peak, reserved_after = counters.peak(), counters.reserved()
            name = getattr(func, "__name__", str(func))  # "convolution.default"
            returned = new_storage_bytes((args, kwargs), out)
            inside = inside_bytes(before, peak, returned)
            self.calls += 1
            if inside > 0 or name.split(".")[0] in CONVOLUTIONS:
                row = {"phase": phase_of(), "op": name, "call": self.calls,
                       "inside_bytes": inside,
                       "reserved_growth_bytes": max(0, reserved_after - reserved_before),
                       "out_bytes": returned}
                row.update(describe_call(name, args))
                self.rows.append(row)
            return out

    return OpTransients()


class CudaCounters:
    """The caching allocator's counters (host-side bookkeeping: exact, no sync needed)."""

    def __init__(self):
        import torch
        self._cuda = torch.cuda

    def allocated(self):
        return self._cuda.memory_allocated()

    def reserved(self):
        return self._cuda.memory_reserved()

    def reset_peak(self):
        self._cuda.reset_peak_memory_stats()

    def peak(self):
        return self._cuda.max_memory_allocated()


def run_one(model_name: str, batch: int):
    """One job in this process; returns its rows."""
    import torch
    import torch.nn.functional as F
    import timm
    from lease import timm_job

    torch.backends.cudnn.benchmark = False
    model, opt, x, y, shape = timm_job(model_name, batch)
    phase = ["forward"]

    def step():
        phase[0] = "forward"
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        phase[0] = "backward"
        loss.backward()
        phase[0] = "optimizer"
        opt.step()

    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    whole = {"op": "step", "allocated_peak_bytes": torch.cuda.max_memory_allocated(),
             "reserved_peak_bytes": torch.cuda.max_memory_reserved()}
    mode = make_op_transients(CudaCounters(), lambda: phase[0])
    with mode:
        step()
    torch.cuda.synchronize()
    common = {"model": model_name, "batch": batch, "input_size": list(shape),
              "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
              "cudnn": torch.backends.cudnn.version(), "timm": timm.__version__}
    return [dict(common, **r) for r in mode.rows + [whole]]


def run_child(model: str, batch: int, timeout: float):
    cmd = [sys.executable, __file__, "--child", "--model", model, "--batch", str(batch)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return [{"model": model, "batch": batch, "op": "step", "status": "TIMEOUT"}]
    rows = [json.loads(line[4:]) for line in p.stdout.splitlines()
            if line.startswith("ROW ")]
    if not rows:
        return [{"model": model, "batch": batch, "op": "step", "status": "CRASHED",
                 "error": (p.stderr or p.stdout)[-600:]}]
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model")
    p.add_argument("--batch", type=int)
    p.add_argument("--jobs", default="", help="model@batch,... to measure")
    add_lease_arguments(p, "jobs", 180)
    args = p.parse_args(argv)
    if args.child:
        for row in run_one(args.model, args.batch):
            print("ROW " + json.dumps(row), flush=True)
        return 0
    jobs = [j for j in args.jobs.split(",") if j]
    if not jobs:
        p.error("--jobs: name at least one model@batch")
    out = sys.stdout if args.out == "-" else open(args.out, "a")
    started = time.time()
    for k, job in until_deadline(jobs, args.deadline_s):
        model, batch = job.split("@")
        rows = run_child(model, int(batch), args.timeout_s)
        for row in rows:
            out.write(json.dumps(row) + "\n")
        out.flush()
        kept = sum(1 for r in rows if r.get("op") != "step")
        print(f"[{k}/{len(jobs)}] {job}: {kept} op rows "
              f"({time.time() - started:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
