"""lab/gpu/measure_step_reserved.py's inputs, on the CPU: every row it is to measure
is a GPUMemNet CNN row that rebuilds as the generator built it, and a row missing from
the CSV is refused before any GPU work starts."""
import json
import os
import subprocess
import sys

from gpuest.synthetic.rebuild import rebuild

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
SCRIPT = os.path.join(ROOT, "lab", "gpu", "measure_step_reserved.py")
ROWS = os.path.join(ROOT, "lab", "gpu", "step_reserved_rows.json")


def test_every_row_to_measure_rebuilds_the_model_that_was_measured(measured_cnn_rows):
    by_file = {r["Filename"]: r for r in measured_cnn_rows}
    wanted = json.load(open(ROWS))
    assert len(wanted) >= 10
    for w in wanted:
        assert w["file"] in by_file, w["file"]
        _, _, batch, extra = rebuild("cnn", by_file[w["file"]], device="meta")
        assert extra["matched"] is True, w["file"]
        assert w["simulated_step2_reserved_mib"] >= w["simulated_step1_reserved_mib"]


def test_a_row_missing_from_the_csv_is_refused_by_name(tmp_path):
    from conftest import FIXTURE_ROOT
    rows = tmp_path / "rows.json"
    rows.write_text(json.dumps([{"file": "no-such-row.out"}]))
    p = subprocess.run([sys.executable, SCRIPT, "--csv", os.path.join(FIXTURE_ROOT, "gpumemnet", "cnn.csv"),
                        "--rows", str(rows)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert "no-such-row.out" in p.stderr
