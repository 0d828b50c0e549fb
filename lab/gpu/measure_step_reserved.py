"""Measure, on a real GPU, how the caching allocator's reserved memory grows from the
first training step to the next ones on GPUMemNet's CNNs, as their generator trained
them (Adam, lr 1e-3, cross-entropy, zero_grad(), cuDNN benchmark off: PyTorch's
default, which the generator's cnn.py keeps).

The lead it checks: replayed through the
simulation, 585 of 1,623 of these CNNs reserve over 5 % more in the second step than in
the first, up to 11 GB. Adam's state, created in the first step's optimizer step, lands
in the smallest free blocks, the activations' freed blocks; the second forward then
takes for each activation the next larger block, and the largest activations map new
segments. Measured on the A100, some of these jobs peaked near the second step's
figure and others near the first's (lab/gpu/step_reserved_rows.json holds the
rows, their A100 peaks and both simulated figures). Per step, after resetting the
peaks, this records max_memory_allocated and max_memory_reserved, so the two can be
compared with the simulation's step by step.

    python3 lab/gpu/measure_step_reserved.py --csv .devcarry/cnn.csv \\
        --rows lab/gpu/step_reserved_rows.json --out step_reserved.jsonl

--cap-mib caps the allocator (set_per_process_memory_fraction) as the A100 40GB's
card did (40,960 MiB less its 1,429 MiB context), so a step that would exceed it
releases the cache and retries, as it did there.
"""
from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys

from lease import add_lease_arguments, until_deadline

MIB = 1 << 20


def run_one(row: dict, steps: int, cap_mib: float) -> dict:
    """One GPUMemNet row in this process, trained as its generator trained it."""
    import torch
    from gpuest.synthetic.rebuild import rebuild

    torch.backends.cudnn.benchmark = False
    torch.cuda.init()
    _, total = torch.cuda.mem_get_info()
    if cap_mib:
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap_mib * MIB / total))
    model, shape, batch, extra = rebuild("cnn", row, device="cuda")
    classes = extra["config"].get("num_classes", 10)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    result = {"file": row.get("Filename") or row.get("filename"), "batch": batch,
              "matched": extra["matched"], "gpu": torch.cuda.get_device_name(),
              "torch": torch.__version__, "cap_mib": cap_mib or None, "steps": []}
    for _ in range(steps):
        x = torch.randn(batch, *shape, device="cuda")
        y = torch.randint(0, classes, (batch,), device="cuda")
        torch.cuda.reset_peak_memory_stats()
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        stats = torch.cuda.memory_stats()
        result["steps"].append({
            "allocated_peak_mib": torch.cuda.max_memory_allocated() / MIB,
            "reserved_peak_mib": torch.cuda.max_memory_reserved() / MIB,
            "reserved_after_mib": torch.cuda.memory_reserved() / MIB,
            "segments": stats.get("segment.all.current", 0),
            "alloc_retries": stats.get("num_alloc_retries", 0)})
        del loss
    result["status"] = "OK"
    return result


def run_child(row: dict, steps: int, cap_mib: float, timeout: float) -> dict:
    cmd = [sys.executable, __file__, "--child", "--steps", str(steps),
           "--cap-mib", str(cap_mib or 0)]
    try:
        p = subprocess.run(cmd, input=json.dumps(row), capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"file": row.get("Filename"), "status": "TIMEOUT"}
    for line in p.stdout.splitlines():
        if line.startswith("ROW "):
            return json.loads(line[4:])
    error = (p.stderr or p.stdout)[-600:]
    return {"file": row.get("Filename"),
            "status": "OOM" if "OutOfMemoryError" in error else "CRASHED",
            "error": error}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--csv", default="../shared/data/gpumemnet/cnn.csv",
                   help="GPUMemNet's cnn.csv (the rows' layer lists pick the model)")
    p.add_argument("--rows", default="lab/gpu/step_reserved_rows.json",
                   help="JSON list of {\"file\": <the row's Filename>, ...}")
    p.add_argument("--steps", type=int, default=3,
                   help="training steps, each measured from reset peaks")
    p.add_argument("--cap-mib", type=float, default=0,
                   help="the allocator's cap in MiB (set_per_process_memory_fraction); "
                        "0: uncapped")
    add_lease_arguments(p, "rows", 120)
    args = p.parse_args(argv)
    if args.child:
        row = json.loads(sys.stdin.read())
        print("ROW " + json.dumps(run_one(row, args.steps, args.cap_mib)), flush=True)
        return 0
    wanted = json.load(open(args.rows))
    with open(args.csv, newline="") as f:
        by_file = {r["Filename"]: r for r in csv.DictReader(f)}
    missing = [w["file"] for w in wanted if w["file"] not in by_file]
    if missing:
        p.error(f"--rows: {len(missing)} files are not in {args.csv}, e.g. {missing[0]}")
    out = sys.stdout if args.out == "-" else open(args.out, "a")
    for k, w in until_deadline(wanted, args.deadline_s, "rows"):
        result = run_child(by_file[w["file"]], args.steps, args.cap_mib, args.timeout_s)
        result["expected"] = w
        out.write(json.dumps(result) + "\n")
        out.flush()
        peaks = [round(s["reserved_peak_mib"]) for s in result.get("steps", [])]
        print(f"[{k}/{len(wanted)}] {result['status']} reserved per step {peaks}; "
              f"simulated {w['simulated_step1_reserved_mib']:.0f} then "
              f"{w['simulated_step2_reserved_mib']:.0f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
