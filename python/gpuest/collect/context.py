"""The context of a GPU node's stack: the device memory a training process holds outside
PyTorch's caching allocator (the CUDA context, cuDNN / cuBLAS handle state and the
kernel modules loaded so far). gpuest's bound adds it to the simulated reserved peak,
and it depends on the GPU, the driver, the CUDA runtime's major version, lazy module
loading (CUDA_MODULE_LOADING) and the PyTorch build, not on the job: so it is measured
once per node image, not per job.

Each workload runs in a fresh process (a kernel module loaded by one would otherwise
count for the next): a bare CUDA initialisation, an fp32 convolutional training step
(SGD with momentum, cuDNN benchmark off) and a bf16 transformer step (AdamW, fused
attention). The context is the process's device memory (NVML's per-process figure,
or the device's used memory less what was used before the process started where the
driver lists no processes) less torch.cuda.memory_reserved() at the end of the step;
the stack's context is the largest over the workloads.

The result is one JSON object that gpuest-server reads from its contexts directory
(--contexts_dir; models/contexts/ by default) at start and on a reload, without a
rebuild: see docs/contexts.md."""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time

from ..stack import software_stack

MIB = 1 << 20
WORKLOADS = ("init", "cnn", "transformer")
FORMAT = "gpuest-context/1"


def process_used_bytes(pynvml, handle, before_device_used):
    """The process's device memory, and how it was read: NVML's per-process figure, or
    the device's used memory less before_device_used (None: not available)."""
    pid = os.getpid()
    try:
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
            if p.pid == pid and p.usedGpuMemory:
                return int(p.usedGpuMemory), "nvml-process"
    except pynvml.NVMLError:
        pass
    if before_device_used is None:
        return None, "unavailable"
    used = pynvml.nvmlDeviceGetMemoryInfo(handle).used
    return int(used - before_device_used), "device-used-delta"


def _run_workload(name: str) -> None:
    import torch
    if name == "cnn":
        torch.backends.cudnn.benchmark = False
        layers = []
        channels = 3
        for width in (32, 64, 128):
            layers += [torch.nn.Conv2d(channels, width, 3, padding=1, bias=False),
                       torch.nn.BatchNorm2d(width), torch.nn.ReLU(inplace=True),
                       torch.nn.MaxPool2d(2)]
            channels = width
        model = torch.nn.Sequential(*layers, torch.nn.AdaptiveAvgPool2d(1),
                                    torch.nn.Flatten(), torch.nn.Linear(channels, 10)).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        x = torch.randn(16, 3, 64, 64, device="cuda")
        y = torch.randint(0, 10, (16,), device="cuda")
        for _ in range(2):
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    elif name == "transformer":
        layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True,
                                                 norm_first=True)
        model = layer.cuda().to(torch.bfloat16)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        x = torch.randn(8, 128, 256, device="cuda", dtype=torch.bfloat16)
        for _ in range(2):
            opt.zero_grad(set_to_none=True)
            model(x, is_causal=False).float().pow(2).mean().backward()
            opt.step()
    else:
        torch.zeros(1, device="cuda")
    torch.cuda.synchronize()


def measure_workload(name: str, gpu_index: int) -> dict:
    """One workload in this process: the row."""
    import pynvml
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(gpu_index)
    before = pynvml.nvmlDeviceGetMemoryInfo(handle).used
    import torch
    torch.cuda.set_device(0)  # CUDA_VISIBLE_DEVICES names gpu_index for the child
    _run_workload(name)
    used, how = process_used_bytes(pynvml, handle, before)
    reserved = torch.cuda.memory_reserved()
    return {"workload": name, "process_used_mib": used / MIB,
            "reserved_mib": reserved / MIB, "context_mib": (used - reserved) / MIB,
            "read_by": how}


def measure(gpu_index: int = 0, timeout_s: float = 120.0) -> dict:
    """Every workload in a process of its own; the node's context record."""
    import pynvml
    import torch
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(gpu_index)
    name = pynvml.nvmlDeviceGetName(handle)
    name = name.decode() if isinstance(name, bytes) else name
    driver = pynvml.nvmlSystemGetDriverVersion()
    driver = driver.decode() if isinstance(driver, bytes) else driver
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(gpu_index))
    rows = []
    for workload in WORKLOADS:
        started = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "gpuest.collect.context", "--child",
                            workload, "--gpu", str(gpu_index)],
                           env=env, capture_output=True, text=True, timeout=timeout_s)
        lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
        if p.returncode != 0 or not lines:
            raise RuntimeError(f"the {workload} workload failed (exit {p.returncode}): "
                               f"{(p.stderr or p.stdout).strip()[-400:]}")
        row = json.loads(lines[-1])
        row["seconds"] = round(time.perf_counter() - started, 1)
        print(f"gpuest-collect context: {workload}: {row['context_mib']:.0f} MiB outside "
              f"the allocator ({row['read_by']})", file=sys.stderr, flush=True)
        rows.append(row)
    return {"format": FORMAT, "gpu_name": name, "driver": driver,
            "stack": dict(software_stack(torch),
                          cudnn=torch.backends.cudnn.version() or 0),
            "context_mib": round(max(r["context_mib"] for r in rows)),
            "workloads": rows, "host": platform.node(),
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def main(argv=None) -> int:
    import argparse
    p = argparse.ArgumentParser(
        prog="gpuest-collect context",
        description="Measure this node's context (device memory a training process "
                    "holds outside PyTorch's allocator) on its own stack: the JSON goes "
                    "into the model repository's contexts/ directory, which "
                    "gpuest-server reads at start and on a reload (docs/contexts.md). "
                    "About 30 s; run it with the job's image and CUDA_MODULE_LOADING, "
                    "on a GPU no other process uses where the driver gives no "
                    "per-process figure. Exit 1 when no GPU can be measured.")
    p.add_argument("--gpu", type=int, default=0, metavar="INDEX")
    p.add_argument("--out", default="-", help="where the JSON goes (- for stdout)")
    p.add_argument("--child", choices=WORKLOADS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(measure_workload(args.child, args.gpu)), flush=True)
        return 0
    try:
        record = measure(args.gpu)
    except Exception as e:  # noqa: BLE001 - no NVML, no CUDA, a workload that failed
        print(f"gpuest-collect context: cannot measure GPU {args.gpu}: "
              f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1
    text = json.dumps(record, indent=2) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
