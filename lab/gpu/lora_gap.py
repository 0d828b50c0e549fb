"""What is live at the peak of one training step, on the GPU and in describe's trace,
side by side: each allocation grouped by its size and the innermost line of the model's
code (transformers, peft, torch.nn) that made it. A lead for issue "llm": the trace is
7-11 % under the measured allocated peak of Llama LoRA jobs without checkpointing, and
within 1 % of everything else.

    python3 lab/gpu/lora_gap.py llama-0.2b/lora_bf16@4x1024 [more jobs]
        (on a GPU machine with transformers and peft, from the checkout)

The GPU side replays torch.cuda.memory's recorded history of the first step; the trace
side is describe's own AllocationTracer, with the Python stack taken at each new storage.
"""
import collections
import sys

sys.path.insert(0, "lab/gpu")
sys.path.insert(0, "python")
import torch  # noqa: E402

import measure_llm_finetune as m  # noqa: E402

MIB = 1 << 20
MODEL_CODE = ("transformers/", "peft/", "torch/nn/modules/", "torch/nn/functional", "torch/optim/")


def site(frames):
    """The innermost frame in the model's code, as 'file.py:line name'."""
    for f in frames:
        name = f["filename"]
        if any(k in name for k in MODEL_CODE):
            return f"{name.split('/')[-1]}:{f['line']} {f['name']}"
    return "?"


def peak_live(events):
    """events: (time, +size or -size, key, site); the live (size, site) at the peak."""
    live, now, best, best_set = {}, 0, -1, {}
    for _, delta, key, where in events:
        if delta > 0:
            live[key] = (delta, where)
            now += delta
            if now > best:
                best, best_set = now, dict(live)
        elif key in live:
            now -= live.pop(key)[0]
    return best, collections.Counter(
        (round(size / MIB, 2), where) for size, where in best_set.values())


def real(model_name, config, batch, seq):
    model = m.build(config, "cuda", model_name)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4)
    ids = torch.randint(0, 32000, (batch, seq), device="cuda")
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    torch.cuda.memory._record_memory_history(stacks="python", max_entries=1_000_000)
    m.lm_step(model, ids).backward()
    opt.step()
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    peak = torch.cuda.max_memory_allocated()
    events = []
    for i, e in enumerate(snap["device_traces"][0]):
        if e["action"] == "alloc":
            events.append((i, e["size"], e["addr"], site(e.get("frames", []))))
        elif e["action"] == "free_requested":
            events.append((i, -e["size"], e["addr"], ""))
    step_peak, groups = peak_live(events)
    return peak, base, step_peak, groups


def traced(model_name, config, batch, seq):
    from gpuest.describe import api, step, tracer as tr
    captured, sites = {}, {}
    track = tr.AllocationTracer.track

    def track_with_site(self, t, at=None):
        n = len(self.sizes)
        idx = track(self, t, at)
        if idx is not None and idx == n:
            frame, frames = sys._getframe(1), []
            while frame is not None:  # innermost first, cheap: no source lines read
                frames.append({"filename": frame.f_code.co_filename,
                               "line": frame.f_lineno, "name": frame.f_code.co_name})
                frame = frame.f_back
            sites[idx] = site(frames)
        return idx

    original = step.traced_step

    def keep(*a, **k):
        captured["trace"] = original(*a, **k)
        return captured["trace"]

    tr.AllocationTracer.track = track_with_site
    api.traced_step = keep
    try:
        dtype, amp, _, _ = m.CONFIGS[config]
        model = m.build(config, "meta", model_name)
        api.describe_json(model, input_shape=(seq,), input_dtype="int64", batch_size=batch,
                          optimizer="adamw", dtype=dtype, amp=amp or False,
                          name="gap", step=m.lm_step)
    finally:
        tr.AllocationTracer.track = track
        api.traced_step = original
    t = captured["trace"]  # gpuest.describe.tracer.Trace
    events = []
    for i, size in enumerate(t.sizes):
        where = (f"{sites.get(i, '?')} [{t.phase_of[i]} "
                 f"{t.category[i].split('_')[-1].lower()}]")
        events.append((2 * t.alloc_at[i], size, i, where))
        if t.free_at[i]:
            events.append((2 * t.free_at[i] - 1, -size, i, ""))
    events.sort(key=lambda e: e[0])
    # Parameters and inputs exist before the step on the GPU too: the GPU side counts
    # from its base, so the trace's are kept apart.
    before = sum(s for i, s in enumerate(t.sizes) if t.phase_of[i] == "setup")
    step_peak, groups = peak_live([e for e in events if t.phase_of[e[2]] != "setup"])
    return before, step_peak, groups


def main(jobs):
    for job in jobs:
        name, rest = job.split("/")
        config, shape = rest.split("@")
        batch, seq = map(int, shape.split("x"))
        peak, base, real_step, real_groups = real(name, config, batch, seq)
        before, fake_step, fake_groups = traced(name, config, batch, seq)
        print(f"== {job}: GPU max_memory_allocated {peak / MIB:.1f} MiB (base {base / MIB:.1f}"
              f", step's live peak {real_step / MIB:.1f}); trace: setup {before / MIB:.1f}, "
              f"step's live peak {fake_step / MIB:.1f} MiB")
        by_size_real = collections.Counter()
        by_size_fake = collections.Counter()
        for (size, _), n in real_groups.items():
            by_size_real[size] += n
        for (size, _), n in fake_groups.items():
            by_size_fake[size] += n
        print("  size MiB: count on the GPU / in the trace (sizes whose counts differ)")
        for size in sorted(set(by_size_real) | set(by_size_fake), reverse=True):
            if by_size_real[size] != by_size_fake[size] and size >= 0.5:
                print(f"   {size:9.2f}: {by_size_real[size]:4d} / {by_size_fake[size]:4d}")
        for label, groups in (("GPU", real_groups), ("trace", fake_groups)):
            print(f"  {label}: live at the peak, largest groups (MiB each, count, site)")
            total = collections.Counter()
            for (size, where), n in groups.items():
                total[(size, where)] = size * n
            for (size, where), mib in total.most_common(40):
                print(f"   {size:9.2f} x {groups[(size, where)]:4d} = {mib:9.1f}  {where}")
        sys.stdout.flush()
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1:] or ["llama-0.2b/lora_bf16@4x1024"])
