"""What the GPU measurement scripts share: timm's training job as timm's train.py sets it
up, and a list of jobs run one at a time until a lease's deadline."""
from __future__ import annotations

import sys
import time


def timm_job(model_name: str, batch: int):
    """timm's model at its default input size, on the GPU, with train.py's defaults (SGD
    with momentum), a random batch and its labels: (model, optimizer, x, y, input_size)."""
    import torch
    import timm

    model = timm.create_model(model_name, pretrained=False)
    cfg = model.pretrained_cfg or {}
    shape = tuple(cfg.get("input_size", (3, 224, 224)))
    num_classes = getattr(model, "num_classes", 1000) or 1000
    model = model.cuda().train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, *shape, device="cuda")
    y = torch.randint(0, num_classes, (batch,), device="cuda")
    return model, opt, x, y, shape


def until_deadline(items: list, deadline_s: float, what: str = "jobs"):
    """Yields (k, item), counting from 1, until deadline_s seconds have passed since the
    first; then says on stderr how many were not measured."""
    started = time.time()
    for k, item in enumerate(items, 1):
        if time.time() - started > deadline_s:
            print(f"deadline reached; {len(items) - k + 1} {what} not measured",
                  file=sys.stderr)
            return
        yield k, item


def add_lease_arguments(parser, what: str, timeout_s: float) -> None:
    """--out, --deadline-s and --timeout-s, as every measurement script takes them."""
    parser.add_argument("--out", default="-", help="JSON lines, appended (- for stdout)")
    parser.add_argument("--deadline-s", type=float, default=1e9,
                        help=f"stop starting new {what} after this many seconds")
    parser.add_argument("--timeout-s", type=float, default=timeout_s,
                        help=f"per {what[:-1]}, in its own process")


def outside_allocator_mib() -> dict:
    """What this process holds on the device beyond the caching allocator's reserved
    bytes, right now: {"process_used_mib", "context_mib", "context_read_by"}. The same
    reading as `gpuest-collect context` (gpuest.collect.context), so a job's row and a
    node's context are one figure."""
    import pynvml
    import torch
    from gpuest.collect.context import process_used_bytes
    pynvml.nvmlInit()
    index = torch.cuda.current_device()
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    used, how = process_used_bytes(pynvml, handle, None)
    if used is None:
        return {"context_read_by": how}
    return {"process_used_mib": used / (1 << 20),
            "context_mib": (used - torch.cuda.memory_reserved()) / (1 << 20),
            "context_read_by": how}
