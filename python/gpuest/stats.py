"""The project's one quantile, as common/quantile.h defines it in C++: nearest rank
(Hyndman & Fan type 1), the ceil(q x n)-th smallest value, q clamped to [0, 1]. An
observed value, never one interpolated between two, so that "95 % of the rows are at
or below it" holds exactly. tests/data/quantile_cases.json holds cases both languages'
tests check."""
from __future__ import annotations

import math
from typing import Iterable


def quantile(values: Iterable[float], q: float) -> float:
    """The q-quantile of ``values``; NaN for none."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    rank = math.ceil(min(max(q, 0.0), 1.0) * len(ordered))
    return ordered[min(max(rank, 1), len(ordered)) - 1]
