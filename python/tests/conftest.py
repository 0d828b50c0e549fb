"""Shared fixtures: the datasets (read in place, never copied) and sys.path.

Rows come from two sources. The measured datasets are not in the repository: they are
found where GPUEST_DATA_DIR points (the folder holding gpumemnet/, lucid/, timm/), by
default ../shared/data beside the checkout; without them a test that needs them is
skipped with a line naming the dataset, or fails when GPUEST_REQUIRE_DATA=1 (CI sets
it). The project's own fixture rows (tests/data/fixture-datasets, made by its
generators, no measurements) are always there, so every code path that reads rows runs
in a fresh clone: the `*_rows` fixtures run a test on both.
"""
import csv
import os
import sys

import pytest

from helpers import PYTHONPATH

# python/ and the generated gpuest.v1 (build/python), so `import gpuest` works bare.
sys.path[:0] = PYTHONPATH.split(os.pathsep)
HERE = os.path.dirname(os.path.abspath(__file__))

DATA_ROOT = os.environ.get("GPUEST_DATA_DIR") or os.path.normpath(
    os.path.join(HERE, "..", "..", "..", "shared", "data"))
FIXTURE_ROOT = os.path.normpath(os.path.join(HERE, "..", "..", "tests", "data",
                                             "fixture-datasets"))


def measured_path(relative):
    """DATA_ROOT/relative, or the test ends: skipped, or failed under GPUEST_REQUIRE_DATA=1."""
    path = os.path.join(DATA_ROOT, relative)
    if not os.path.exists(path):
        message = (f"dataset {relative} not found under {DATA_ROOT}: set GPUEST_DATA_DIR to "
                   "the folder holding gpumemnet/, lucid/ and timm/ (README.md, \"The "
                   "measured data\")")
        if os.environ.get("GPUEST_REQUIRE_DATA") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return path


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_rows(name, source="measured"):
    if source == "fixture":
        return read_csv(os.path.join(FIXTURE_ROOT, "gpumemnet", name))
    return read_csv(measured_path(os.path.join("gpumemnet", name)))


@pytest.fixture(scope="session", params=["fixture", "measured"])
def rows_source(request):
    return request.param


@pytest.fixture(scope="session")
def mlp_rows(rows_source):
    return read_rows("mlp.csv", rows_source)


@pytest.fixture(scope="session")
def cnn_rows(rows_source):
    return read_rows("cnn.csv", rows_source)


@pytest.fixture(scope="session")
def transformer_rows(rows_source):
    return read_rows("transformer_sample.csv", rows_source)


@pytest.fixture(scope="session")
def measured_cnn_rows():
    return read_rows("cnn.csv", "measured")
