"""gpuest-collect end to end on the CPU (--dry-run): real children describe and train
tiny models; the collector is interrupted mid-run (SIGTERM; SIGKILL of its whole
process group) and restarted, and no finished row is lost or duplicated; an
out-of-memory child, a hung one and one killed by a signal are rows with their status;
the cleaned files have the shared datasets' columns first."""
import csv
import glob
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from conftest import measured_path
from helpers import PYTHONPATH
from gpuest.collect import clean
from gpuest.collect.calibrate import CalibrationError, context_residuals
from gpuest.collect.__main__ import main
from gpuest.collect.plan import expand
from gpuest.collect.runner import NodeUnusable, RunOptions, run_job

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
REPO = os.path.dirname(PYTHON_DIR)

MLP = {"input_size": 32, "output_size": 10, "depth": 2, "architecture": "pyramid",
       "batch_size": 8, "activation": "relu", "dropout_rate": 0.2, "use_dropout": True,
       "use_batch_norm": True}
BIG_MLP = dict(MLP, input_size=4096, batch_size=262144, use_batch_norm=False)
TINY_PLAN = {
    "steps": 2, "warmup_steps": 1, "timeout_s": 120, "optimizers": ["adam"],
    "synthetic": [
        {"family": "mlp", "precisions": ["fp32", "amp"], "params": MLP},
        {"family": "transformer", "params": {
            "num_classes": 5, "embedding_size": 16, "num_layers": 1, "num_heads": 4,
            "ff_hidden_size": 32, "dropout_rate": 0.1, "seq_length": 12, "vocab_size": 50,
            "batch_size": 4}},
        # A 4 GiB batch, beyond the children's address-space limit: out of memory.
        {"family": "mlp", "params": BIG_MLP},
        # Killed at its timeout, before it is even built: no child imports torch in
        # 50 ms, however idle the machine (1 s was not enough on an idle one).
        {"family": "mlp", "timeout_s": 0.05, "params": dict(MLP, depth=1)}],
    "pair_seconds": 1,
}


def child_memory_limit_mb():
    """Room for a child to import torch and run the tiny jobs, not for the 4 GiB batch:
    this process's address space (torch imported) and 1 GiB more."""
    with open("/proc/self/status") as f:
        vm_kib = next(int(l.split()[1]) for l in f if l.startswith("VmSize:"))
    return vm_kib // 1024 + 1024


def collector(args, **kw):
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    return subprocess.Popen([sys.executable, "-m", "gpuest.collect", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def finish(args):
    p = collector(args)
    out, err = p.communicate(timeout=240)
    return p.returncode, err


def lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [l for l in f.read().split("\n") if l]


def running_child(out_dir):
    """The pid of the child running now (its result file says), or None."""
    for path in glob.glob(os.path.join(out_dir, "gpuest-job-*.json")):
        try:
            with open(path) as f:
                return json.load(f)["pid"]
        except (OSError, ValueError, KeyError):
            pass  # between the collector's mkstemp and the child's first write
    return None


def wait_for_rows_and_child(out_dir, rows, proc):
    """Until ``rows`` rows are finished and the next job's child is running; its pid."""
    deadline = time.time() + 180
    while time.time() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        pid = running_child(out_dir)
        if len(lines(os.path.join(out_dir, "rows.jsonl"))) >= rows and pid:
            return pid
        time.sleep(0.05)
    pytest.fail(f"no row {rows} and child in {out_dir} within the deadline")


@pytest.fixture(scope="module")
def killed_and_resumed(tmp_path_factory):
    """A dry run of five jobs and a pair, interrupted three ways and resumed."""
    d = tmp_path_factory.mktemp("collect")
    plan_doc = dict(TINY_PLAN)
    ids = [j.id for j in expand(plan_doc).jobs]
    plan_doc["pairs"] = [[ids[0], ids[2]]]  # the MLP in fp32 beside the Transformer
    plan_path = d / "plan.yaml"
    plan_path.write_text(yaml.safe_dump(plan_doc))
    out = str(d / "out")
    args = ["run", str(plan_path), "--out", out, "--dry-run",
            "--child-memory-limit-mb", str(child_memory_limit_mb())]
    rows_path = os.path.join(out, "rows.jsonl")

    # 1: SIGTERM to the collector while the second job's child runs: it stops the
    # child and exits, keeping the finished row.
    first = collector(args)
    wait_for_rows_and_child(out, 1, first)
    first.send_signal(signal.SIGTERM)
    _, err1 = first.communicate(timeout=60)
    after_term = lines(rows_path)

    # 2: the second job's child dies (SIGKILL): a CRASH row, and the collector goes on;
    # then SIGKILL to the collector and its child at once, while the third job runs.
    second = collector(args, start_new_session=True)
    os.kill(wait_for_rows_and_child(out, 1, second), signal.SIGKILL)
    wait_for_rows_and_child(out, 2, second)
    os.killpg(second.pid, signal.SIGKILL)
    second.communicate(timeout=60)
    after_kill = lines(rows_path)

    # 3: to the end.
    rc3, err3 = finish(args)
    return {"dir": out, "ids": ids, "rc1": first.returncode, "err1": err1,
            "after_term": after_term, "rc2": second.returncode, "after_kill": after_kill,
            "rc3": rc3, "err3": err3, "rows": lines(rows_path)}


def test_kills_lose_and_duplicate_no_finished_row(killed_and_resumed):
    r = killed_and_resumed
    assert r["rc1"] == 1 and "interrupted (signal SIGTERM)" in r["err1"], r["err1"]
    assert len(r["after_term"]) == 1
    assert r["rc2"] == -signal.SIGKILL and len(r["after_kill"]) == 2
    assert r["rc3"] == 0, r["err3"]
    assert "5 jobs, 2 already finished" in r["err3"]
    rows = r["rows"]
    # Finished rows are never rewritten: each kill's rows are the final file's prefix.
    assert rows[:2] == r["after_kill"] and rows[:1] == r["after_term"]
    got = [json.loads(l)["id"] for l in rows]
    assert len(got) == len(set(got)) == 6
    assert got[:5] == r["ids"] and got[5] == f"pair/{r['ids'][0]}+{r['ids'][2]}"
    # No killed child's result file is left behind.
    assert not glob.glob(os.path.join(r["dir"], "gpuest-job-*"))


def test_a_child_killed_by_a_signal_is_a_crash_row(killed_and_resumed):
    crashed = json.loads(killed_and_resumed["rows"][1])
    assert crashed["status"] == "CRASH", crashed
    assert crashed["error"].startswith("the child was killed by signal SIGKILL at stage ")
    assert crashed["job"]["precision"] == "amp"


def test_dry_run_rows_describe_and_run_each_job(killed_and_resumed):
    rows = [json.loads(l) for l in killed_and_resumed["rows"]]
    for row in (rows[0], rows[2]):
        assert row["status"] == "DRY_RUN", row
        d = row["description"]
        assert d["batchSize"] == row["job"]["batch_size"] and d["layers"]
        assert len(d["trace"]["sizeBytes"]) > 10, d.get("traceUnavailableReason")
        assert bool(d.get("mixedPrecision")) == (row["job"]["precision"] == "amp")
        m = row["measurement"]
        assert m["measured_steps"] == 1 and m["samples_per_s"] > 0
        assert row["versions"]["torch"]
    transformer = rows[2]
    assert transformer["description"]["family"] == "MODEL_FAMILY_TRANSFORMER"
    assert transformer["description"]["sequenceLength"] == 12
    pair = rows[5]
    assert pair["kind"] == "pair" and pair["status"] == "DRY_RUN"
    assert all(s > 0 for s in pair["speeds"])


def test_cleaned_files_have_the_shared_columns_first(killed_and_resumed):
    out = killed_and_resumed["dir"]
    with open(measured_path(os.path.join("timm", "timm_a100.csv")), newline="") as f:
        timm_header = next(csv.reader(f))
    with open(os.path.join(out, "measurements.csv"), newline="") as f:
        table = list(csv.reader(f))
    header = table[0]
    assert header[:len(timm_header)] == timm_header
    assert header == list(clean.COLUMNS) and len(set(header)) == len(header)
    rows = [dict(zip(header, r)) for r in table[1:]]
    assert [r["status"] for r in rows] == ["DRY_RUN", "CRASH", "DRY_RUN", "OOM", "TIMEOUT"]
    assert "killed by signal SIGKILL" in rows[1]["error"]
    assert rows[0]["model"].startswith("input:32_output:10_depth:2") and \
        rows[0]["model"].endswith(".out")
    assert rows[0]["input_size"] == "32" and rows[2]["input_size"] == "12"
    assert [r["batch_size"] for r in rows] == ["8", "8", "4", "262144", "8"]
    assert [r["precision"] for r in rows] == ["fp32", "amp", "fp32", "fp32", "fp32"]
    for r in (rows[0], rows[2]):
        assert r["max_gpu_memory_mib"] == ""  # nothing measured on a GPU
        assert float(r["faketensor_mib"]) > 0 and int(r["trace_allocations"]) > 10
    with open(measured_path(os.path.join("lucid", "colocation.csv")), newline="") as f:
        lucid_header = next(csv.reader(f))
    with open(os.path.join(out, "colocation.csv"), newline="") as f:
        pairs = list(csv.reader(f))
    assert pairs[0][:len(lucid_header)] == lucid_header and len(pairs) == 2
    pair = dict(zip(pairs[0], pairs[1]))
    assert (pair["batchsize1"], pair["batchsize2"]) == ("8", "4")
    assert float(pair["speed1"]) > 0 and float(pair["speed2"]) > 0
    # Nothing measured on a GPU: nothing to calibrate on.
    assert lines(os.path.join(out, "exported.jsonl")) == []
    summary = open(os.path.join(out, "summary.md")).read()
    assert "- 5 jobs: CRASH 1, DRY_RUN 2, OOM 1, TIMEOUT 1" in summary
    assert "- 1 pairs: DRY_RUN 1" in summary


def test_oom_and_hang_are_rows_with_their_status(killed_and_resumed):
    oom, hung = [json.loads(l) for l in killed_and_resumed["rows"][3:5]]
    assert oom["status"] == "OOM" and "can't allocate memory" in oom["error"]
    assert oom["description"]["batchSize"] == 262144  # described before it failed
    assert hung["status"] == "TIMEOUT" and "timeout of 0.05 s" in hung["error"]


def test_a_run_directory_holds_one_kind_of_run(tmp_path, capsys):
    plan_path = tmp_path / "plan.yaml"
    plan_path.write_text(yaml.safe_dump(TINY_PLAN))
    # No GPU here: a GPU run is refused before anything.
    assert main(["run", str(plan_path), "--out", str(tmp_path / "a")]) == 2
    assert "no nvidia-smi here" in capsys.readouterr().err
    # A dry run into a GPU run's directory would make its restart skip unmeasured jobs.
    gpu_dir = tmp_path / "gpu"
    gpu_dir.mkdir()
    (gpu_dir / "run.json").write_text('{"dry_run": false}\n')
    assert main(["run", str(plan_path), "--out", str(gpu_dir), "--dry-run"]) == 1
    assert "holds the rows of a GPU run" in capsys.readouterr().err
    assert not (gpu_dir / "rows.jsonl").exists()


def test_a_plan_of_timm_jobs_needs_the_timm_source(tmp_path, capsys, monkeypatch):
    # Refused up front: otherwise every timm job would become a finished ERROR row that
    # a restart with the right --timm-src would skip.
    plan_path = tmp_path / "plan.yaml"
    plan_path.write_text(yaml.safe_dump({"models": [
        {"source": "timm", "names": ["resnet18"], "batch_sizes": [2]}]}))
    empty = tmp_path / "no-timm"
    empty.mkdir()
    monkeypatch.setenv("GPUEST_TIMM_SRC", str(empty))  # what --timm-src sets
    assert main(["run", str(plan_path), "--out", str(tmp_path / "out"), "--dry-run"]) == 2
    assert f"the plan has timm jobs: {empty} holds no timm/ package" in \
        capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_node_without_cuda_stops_the_run_without_a_row(tmp_path):
    # The GPU path on this CPU machine: no nvidia-smi (the row would have said so) and
    # PyTorch sees no CUDA device, which is the node's fault, not the job's.
    job = expand(TINY_PLAN).jobs[0]
    with pytest.raises(NodeUnusable, match="sees no CUDA device"):
        run_job(job, RunOptions(dry_run=False, work_dir=str(tmp_path)))
    assert os.listdir(tmp_path) == []  # no result file left


def gpu_row(i, smi, reserved, status="OK", name="NVIDIA H200", model=None, batch=8,
            precision="fp32"):
    """A finished row as a GPU run stores it (the parts clean and calibrate read)."""
    model = model or f"m{i}"
    job = {"id": f"timm/{model}/b{batch}/sgd_momentum/{precision}", "source": "timm",
           "model": model, "batch_size": batch, "optimizer": "sgd_momentum",
           "precision": precision, "loss": "auto"}
    return {"id": job["id"], "kind": "job", "job": job, "status": status, "error": "",
            "input_shape": [3, 224, 224], "gpu_name": name, "gpu_memory_mib": 143771.0,
            "driver": "550.54.15", "versions": {"torch": "2.4.1", "cuda": "12.4",
                                                "cudnn": "90100"},
            "measurement": {"smi_process_mib": smi, "torch_max_reserved_mib": reserved,
                            "torch_max_allocated_mib": reserved - 100},
            "description": None}


def test_calibration_from_the_cleaned_csv_rewrites_one_gpu(tmp_path, capsys, monkeypatch):
    # ctest gives the built gpuest-set-gpu-context; by hand, the checkout's build.
    if not os.environ.get("GPUEST_SET_GPU_CONTEXT"):
        monkeypatch.setenv("GPUEST_SET_GPU_CONTEXT", os.path.join(
            REPO, "build", "lab", "calibration", "gpuest-set-gpu-context"))
    profiles = tmp_path / "gpu_profiles.json"
    original = open(os.path.join(REPO, "models", "gpu_profiles.json")).read()
    profiles.write_text(original)
    run_dir = tmp_path / "h200"
    run_dir.mkdir()
    rows = [gpu_row(1, 2000.0, 1400.0), gpu_row(2, 5000.0, 4450.0),
            gpu_row(3, 900.0, 290.0), gpu_row(4, 140000.0, 141000.0, status="OOM")]
    clean.clean(rows, str(run_dir))
    summary = (run_dir / "summary.md").read_text()
    assert "- GPU: NVIDIA H200 (143771 MiB)" in summary
    assert "driver 550.54.15; CUDA 12.4; cuDNN 90100; PyTorch 2.4.1" in summary
    assert "- 4 jobs: OK 3, OOM 1" in summary
    assert main(["calibrate", str(run_dir), "--gpu", "h200", "--profiles",
                 str(profiles)]) == 0
    assert "h200 (NVIDIA H200) context 600 MiB from 3 rows" in capsys.readouterr().err
    after = json.loads(profiles.read_text())
    before = json.loads(original)
    changed = [g["id"] for g, b in zip(after["gpus"], before["gpus"]) if g != b]
    assert changed == ["h200"]  # the median of 600, 550 and 610; OOM rows left out
    h200 = next(g for g in after["gpus"] if g["id"] == "h200")
    assert h200["context_mib"] == 600 and h200["constants"] == "calibrated"
    assert "3 successful training runs" in h200["constants_basis"]
    assert h200["constants_basis"].endswith("cuBLAS workspace: PyTorch's default for sm_90 "
                                            "(4096 KiB x 8)")
    # Written by the one writer of the file (GpuProfilesManifest, through
    # gpuest-set-gpu-context): every other GPU as it was.
    assert [g for g in after["gpus"] if g["id"] != "h200"] == \
        [g for g in before["gpus"] if g["id"] != "h200"]
    # The rows' card must be the profile's.
    assert main(["calibrate", str(run_dir), "--gpu", "h100-80gb", "--profiles",
                 str(profiles)]) == 2
    assert "measured on 'NVIDIA H200'" in capsys.readouterr().err
    # A dry run measured nothing to calibrate on.
    rows = clean.read_table(str(run_dir / "measurements.csv"))
    with pytest.raises(CalibrationError, match="rows of one GPU are needed"):
        context_residuals([dict(r, status="DRY_RUN") for r in rows])


def test_the_cleaner_marks_benchmark_transients_as_the_shared_data_does(tmp_path):
    # resnetaa50d on the A100 (timm_a100.csv): 38,835 MiB at batch 8 and 32, 4,489 at
    # 16: memory needed cannot fall as the batch grows. And an interior batch far above
    # the line between its neighbours. Another model's rows are judged on their own.
    peaks = {8: 38835.0, 16: 4489.0, 32: 38835.0, 64: 10151.0, 128: 18015.0}
    rows = [gpu_row(0, p, p - 1400, model="resnetaa50d", batch=b) for b, p in peaks.items()]
    rows += [gpu_row(0, p, p - 1400, model="regnety", batch=b)
             for b, p in {8: 14000.0, 16: 30000.0, 32: 15000.0}.items()]
    rows += [gpu_row(0, p, p - 1400, model="resnet50", batch=b)
             for b, p in {8: 2875.0, 16: 3733.0, 32: 5229.0}.items()]
    rows.append(gpu_row(0, 41000.0, 40000.0, status="OOM", model="resnet50", batch=256))
    assert clean.spikes(rows) == {"timm/resnetaa50d/b8/sgd_momentum/fp32",
                                  "timm/resnetaa50d/b32/sgd_momentum/fp32",
                                  "timm/regnety/b16/sgd_momentum/fp32"}
    clean.clean(rows, str(tmp_path))
    status = {(r["model"], r["batch_size"]): r["status"]
              for r in clean.read_table(str(tmp_path / "measurements.csv"))}
    assert status[("resnetaa50d", "8")] == "SPIKE" and status[("resnetaa50d", "16")] == "OK"
    assert status[("regnety", "16")] == "SPIKE" and status[("resnet50", "256")] == "OOM"
    assert list(status.values()).count("SPIKE") == 3
    # The export keeps a SPIKE row as a completed run with its own status, which the
    # calibration reads (lab/data/exported_rows.cc) and never fits.
    row = dict(rows[0], description={"layers": []})
    record = clean.export_record(row, clean.spikes(rows))
    assert record["status"] == "SUCCESSFUL" and record["measuredStatus"] == "SPIKE"


def test_measured_rows_export_for_the_calibration_tools(killed_and_resumed):
    # The exporter's shape (lab/data/exported_rows.cc reads it): a dry-run row's
    # real description, with what a GPU would have measured.
    row = json.loads(killed_and_resumed["rows"][0])
    assert clean.export_record(row) is None  # nothing measured
    measured = dict(row, status="OOM", measurement={"smi_process_mib": 141000.0})
    record = clean.export_record(measured)
    assert record["fileName"] == row["id"] and record["model"] == row["job"]["model"]
    assert record["status"] == "OOM_CRASH" and record["maxMemoryMib"] == 141000.0
    assert record["description"]["trace"] == row["description"]["trace"]
    assert record["fakeTensorMib"] == clean.trace_peak_mib(row["description"]["trace"]) > 0


def test_compare_matches_the_a100_rows(tmp_path, capsys):
    # On the A100 (timm_a100.csv): resnet50 @ 8 2875 MiB, @ 128 15169 MiB;
    # coatnet_2_rw_224 @ 128 OOM.
    run_dir = tmp_path / "h200"
    run_dir.mkdir()
    clean.clean([gpu_row(1, 3162.5, 2400.0, model="resnet50", batch=8),
                 gpu_row(2, 16685.9, 15000.0, model="resnet50", batch=128),
                 gpu_row(3, 60000.0, 59000.0, model="coatnet_2_rw_224", batch=128),
                 gpu_row(4, 9000.0, 8000.0, model="resnet50", batch=8, precision="amp"),
                 gpu_row(5, 100.0, 50.0, model="not_in_the_a100_data")], str(run_dir))
    timm_csv = measured_path(os.path.join("timm", "timm_a100.csv"))
    assert main(["compare", str(run_dir), "--reference", timm_csv]) == 0
    report = capsys.readouterr().out
    assert "(NVIDIA H200) against" in report
    assert "3 fp32 rows of 2 models matched on model and batch size" in report
    assert "both OK: 2 rows; peak here / reference: median 1.100" in report  # 1.1, 1.1
    assert "out of memory on one card only: 1 rows" in report
    assert "coatnet_2_rw_224 @ 128: OK here, OOM there" in report
