"""gpuest.stats.quantile is common/quantile.h's definition: the same cases pass in both."""
import json
import math
import os

from gpuest.stats import quantile

CASES = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data",
                     "quantile_cases.json")


def test_the_shared_cases():
    with open(CASES) as f:
        cases = json.load(f)["cases"]
    assert len(cases) >= 10
    for c in cases:
        assert quantile(c["values"], c["q"]) == c["quantile"], c


def test_no_values_have_no_quantile():
    assert math.isnan(quantile([], 0.5))
