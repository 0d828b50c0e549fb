"""Measure, on a real GPU, what a timm training job needs and what cuDNN's
benchmark-mode search takes beside it (issue "requirement", deliverable 5).

For each (model, batch) it runs the same fp32 SGD-with-momentum step (timm's train.py
defaults) in a fresh process per configuration, so that neither cuDNN's algorithm
cache nor the allocator's cache carries over:

  off      torch.backends.cudnn.benchmark = False, uncapped
  on       benchmark = True, uncapped (the search sizes its workspace by the free
           memory: Conv_v7.cpp getMaxWorkspaceSize, Conv_v8.cpp generate_and_filter_plans)
  cap      benchmark = True under torch.cuda.set_per_process_memory_fraction at a given
           cap (MiB of allocator-reserved memory); caps come from --cap-factors times
           the 'off' run's reserved peak, and from --cap-file (gpuest's predictions)

Each row records the first iteration's peaks (max_memory_allocated, max_memory_reserved,
and the device's used memory sampled by NVML every millisecond) and the steady state's
(peaks reset after the first step, then --steps more), the memory held outside the
allocator (context, library state), and whether the step completed.

    python3 lab/gpu/measure_cudnn_benchmark.py --jobs resnet50@32,resnet26t@8 \
        --out rows.jsonl
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import threading
import time

MIB = 1 << 20


class NvmlPeak:
    """The device's used memory, polled every millisecond on a thread (nvidia-smi's
    figure, which the shared timm data reports)."""

    def __init__(self):
        import pynvml
        pynvml.nvmlInit()
        self._nvml = pynvml
        index = int(os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or 0)
        self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        self.peak = self.used()
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def used(self) -> int:
        return self._nvml.nvmlDeviceGetMemoryInfo(self._handle).used

    def _run(self):
        while not self._stop:
            self.peak = max(self.peak, self.used())
            time.sleep(0.001)

    def reset(self):
        self.peak = self.used()

    def close(self):
        self._stop = True
        self._thread.join()


def run_one(model_name: str, batch: int, benchmark: bool, cap_mib: float, steps: int):
    """One configuration in this process; returns the row."""
    import torch
    import torch.nn.functional as F
    import timm
    from lease import outside_allocator_mib, timm_job

    nvml = NvmlPeak()
    used_before_cuda = nvml.used()
    torch.backends.cudnn.benchmark = benchmark
    torch.cuda.init()
    free, total = torch.cuda.mem_get_info()
    if cap_mib:
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap_mib * MIB / total))
    model, opt, x, y, shape = timm_job(model_name, batch)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    row = {"model": model_name, "input_size": "x".join(map(str, shape)),
           "batch_size": batch, "cudnn_benchmark": benchmark,
           "cap_mib": round(cap_mib, 1) if cap_mib else None,
           "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version(), "timm": timm.__version__,
           "total_mib": total / MIB, "used_before_cuda_mib": used_before_cuda / MIB}
    torch.cuda.reset_peak_memory_stats()
    nvml.reset()
    status = "OK"
    try:
        step()
        torch.cuda.synchronize()
        row["first_allocated_mib"] = torch.cuda.max_memory_allocated() / MIB
        row["first_reserved_mib"] = torch.cuda.max_memory_reserved() / MIB
        row["first_nvml_mib"] = nvml.peak / MIB
        torch.cuda.reset_peak_memory_stats()
        nvml.reset()
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
        row["steady_allocated_mib"] = torch.cuda.max_memory_allocated() / MIB
        row["steady_reserved_mib"] = torch.cuda.max_memory_reserved() / MIB
        row["steady_nvml_mib"] = nvml.peak / MIB
        # Held outside the allocator at a quiet point: CUDA context, cuDNN/cuBLAS state,
        # lazily loaded kernels.
        row["outside_allocator_mib"] = (nvml.used() - used_before_cuda
                                        - torch.cuda.memory_reserved()) / MIB
        # The same, from NVML's per-process figure: right with processes side by side.
        row.update(outside_allocator_mib())
    except torch.OutOfMemoryError as e:
        status = "OOM"
        row["error"] = str(e).splitlines()[0][:300]
    row["status"] = status
    nvml.close()
    return row


def child_main(args) -> int:
    row = run_one(args.model, args.batch, args.benchmark, args.cap_mib, args.steps)
    print("ROW " + json.dumps(row), flush=True)
    return 0


def run_child(model, batch, benchmark, cap_mib, steps, timeout):
    cmd = [sys.executable, __file__, "--child", "--model", model, "--batch", str(batch),
           "--steps", str(steps), "--cap-mib", str(cap_mib or 0)]
    if benchmark:
        cmd.append("--benchmark")
    started = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"model": model, "batch_size": batch, "cudnn_benchmark": benchmark,
                "cap_mib": cap_mib, "status": "TIMEOUT"}
    for line in p.stdout.splitlines():
        if line.startswith("ROW "):
            row = json.loads(line[4:])
            row["seconds"] = round(time.time() - started, 1)
            return row
    return {"model": model, "batch_size": batch, "cudnn_benchmark": benchmark,
            "cap_mib": cap_mib, "status": "CRASHED",
            "error": (p.stderr or p.stdout)[-600:]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model")
    p.add_argument("--batch", type=int)
    p.add_argument("--benchmark", action="store_true")
    p.add_argument("--cap-mib", type=float, default=0)
    p.add_argument("--jobs", default="", help="model@batch,... to measure")
    p.add_argument("--steps", type=int, default=4, help="steady-state steps after the first")
    p.add_argument("--cap-factors", default="1.0,1.15",
                   help="caps as factors of the 'off' run's reserved peak")
    p.add_argument("--cap-file", default="",
                   help="JSON {\"model@batch\": cap_mib} of predicted requirements")
    p.add_argument("--out", default="-")
    p.add_argument("--deadline-s", type=float, default=1e9,
                   help="stop starting new jobs after this many seconds")
    p.add_argument("--timeout-s", type=float, default=120, help="per configuration")
    p.add_argument("--modes", default="off,on,cap",
                   help="which of off, on, cap to run for each job (cap alone: the "
                        "--cap-file caps only)")
    p.add_argument("--parallel", type=int, default=1,
                   help="jobs at a time (NVML's figures are then device-wide, not the job's)")
    args = p.parse_args(argv)
    if args.child:
        return child_main(args)
    caps = json.load(open(args.cap_file)) if args.cap_file else {}
    modes = set(filter(None, args.modes.split(",")))
    out = sys.stdout if args.out == "-" else open(args.out, "a")
    lock = threading.Lock()
    started = time.time()

    def measure_job(job):
        if time.time() - started > args.deadline_s:
            print(f"deadline reached; {job} not measured", file=sys.stderr)
            return
        model, batch = job.split("@")
        batch = int(batch)

        def emit(row):
            with lock:
                out.write(json.dumps(row) + "\n")
                out.flush()
                print(f"{job} bench={row.get('cudnn_benchmark')} cap={row.get('cap_mib')}: "
                      f"{row['status']} first reserved {row.get('first_reserved_mib', 0):.0f} "
                      f"nvml {row.get('first_nvml_mib', 0):.0f}, steady reserved "
                      f"{row.get('steady_reserved_mib', 0):.0f} MiB", file=sys.stderr,
                      flush=True)

        off = {}
        if "off" in modes:
            off = run_child(model, batch, False, 0, args.steps, args.timeout_s)
            emit(off)
        if "on" in modes:
            emit(run_child(model, batch, True, 0, args.steps, args.timeout_s))
        if "cap" not in modes:
            return
        need = max(off.get("first_reserved_mib", 0), off.get("steady_reserved_mib", 0))
        factors = [float(f) for f in args.cap_factors.split(",") if f]
        cap_list = [f * need for f in factors if need]
        if job in caps:
            cap_list.append(float(caps[job]))  # A cap a run under it must not pass.
        # Smallest cap first; a larger one is tried only if a smaller one ran out.
        for cap in sorted(cap_list):
            row = run_child(model, batch, True, cap, args.steps, args.timeout_s)
            row["cap_basis"] = ("predicted" if job in caps and cap == float(caps[job])
                                else f"{cap / need:.2f} x off reserved peak")
            emit(row)
            if row["status"] == "OK":
                break

    jobs = list(filter(None, args.jobs.split(",")))
    # Processes side by side share the GPU: the allocator's peaks stay per process,
    # but NVML's figures (first/steady_nvml_mib, outside_allocator_mib) then mix them.
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
        list(pool.map(measure_job, jobs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
