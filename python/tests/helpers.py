"""Small helpers the describe tests share."""
from collections import Counter


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
