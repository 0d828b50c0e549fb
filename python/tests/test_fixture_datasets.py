"""The committed fixture rows are what make_fixtures.py makes: nobody edits them by hand,
and a change to the generators that changes them shows here."""
import filecmp
import os
import subprocess
import sys

from conftest import FIXTURE_ROOT

SCRIPT = os.path.join(FIXTURE_ROOT, "make_fixtures.py")
FILES = ["gpumemnet/mlp.csv", "gpumemnet/cnn.csv", "gpumemnet/transformer_sample.csv",
         "lucid/single.csv", "lucid/colocation.csv"]


def test_the_committed_fixture_rows_regenerate_identically(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.path.join(FIXTURE_ROOT, "..", "..", "..", "python"))
    subprocess.run([sys.executable, SCRIPT, "--out", str(tmp_path)], check=True, env=env,
                   timeout=300)
    for name in FILES:
        assert filecmp.cmp(os.path.join(FIXTURE_ROOT, name), str(tmp_path / name),
                           shallow=False), name
