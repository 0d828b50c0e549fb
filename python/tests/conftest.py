"""Shared fixtures: the seed dataset (read in place, never copied) and sys.path."""
import csv
import os
import sys

import pytest

from helpers import PYTHONPATH

# python/ and the generated gpuest.v1 (build/python), so `import gpuest` works bare.
sys.path[:0] = PYTHONPATH.split(os.pathsep)
HERE = os.path.dirname(os.path.abspath(__file__))

DATA_DIR = os.environ.get(
    "GPUEST_SEED_DATA",
    os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "data", "gpumemnet")))


def read_rows(name):
    path = os.path.join(DATA_DIR, name)
    if not os.path.exists(path):
        # A failure, not a skip: a suite that skips its dataset checks still "passes".
        pytest.fail(f"seed data not found at {path} (set GPUEST_SEED_DATA)")
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="session")
def mlp_rows():
    return read_rows("mlp.csv")


@pytest.fixture(scope="session")
def cnn_rows():
    return read_rows("cnn.csv")


@pytest.fixture(scope="session")
def transformer_rows():
    return read_rows("transformer_sample.csv")
