"""Small helpers the describe tests share."""
import os
from collections import Counter

_HERE = os.path.dirname(os.path.abspath(__file__))
# The package's sources and, beside them, its generated modules (gpuest.v1), which the
# build writes to build/python (ctest passes the build's as GPUEST_PYTHON_GEN).
GENERATED_DIR = os.environ.get("GPUEST_PYTHON_GEN",
                               os.path.join(_HERE, "..", "..", "build", "python"))
PYTHONPATH = os.pathsep.join(os.path.normpath(p) for p in (os.path.join(_HERE, ".."),
                                                           GENERATED_DIR))


def describe_dict(*args, **kwargs):
    """gpuest.describe's ModelDescription, in its JSON form (64-bit integers as numbers)."""
    import gpuest
    return gpuest.as_json_dict(gpuest.describe(*args, **kwargs))


def live_curve(trace):
    """Live bytes after each event, and the peak, from a JSON trace."""
    events = []
    for size, a, f in zip(trace["sizeBytes"], trace["allocAt"], trace["freeAt"]):
        events.append((int(a), int(size)))
        if int(f):
            events.append((int(f), -int(size)))
    events.sort()
    live = peak = 0
    curve = []
    for _, delta in events:
        live += delta
        peak = max(peak, live)
        curve.append(live)
    return curve, peak


def bytes_by_category(trace):
    out = Counter()
    for size, cat in zip(trace["sizeBytes"], trace["category"]):
        out[cat.replace("ALLOCATION_CATEGORY_", "")] += int(size)
    return out


def check_trace_shape(trace):
    """Columns line up, times are a clock (unique, from 1), frees follow allocs."""
    n = len(trace["sizeBytes"])
    assert n and all(len(trace[k]) == n for k in ("allocAt", "freeAt", "category"))
    times = [int(a) for a in trace["allocAt"]] + [int(f) for f in trace["freeAt"] if int(f)]
    assert sorted(times) == list(range(1, len(times) + 1))
    for a, f in zip(trace["allocAt"], trace["freeAt"]):
        assert int(f) == 0 or int(f) > int(a)
    assert all(int(s) > 0 for s in trace["sizeBytes"])
