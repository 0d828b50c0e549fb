"""lab/data/export_clean_runs.py, run as deploy/calibrate-memory.sh runs it: only
clean runs (benchmark off, uncapped, OK) with a traced description are written, each at
its reserved peak plus the GPU's measured context; an assumed context is refused."""
import json
import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "lab", "data",
                      "export_clean_runs.py")


def _write(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def _run(model, batch, benchmark=False, cap=None, status="OK"):
    return {"model": model, "batch_size": batch, "cudnn_benchmark": benchmark,
            "cap_mib": cap, "status": status, "first_reserved_mib": 1000.0,
            "steady_reserved_mib": 1200.0}


def _described(model, batch, trace=True):
    d = {"name": model, "batchSize": batch, "cudnnBenchmark": True}
    if trace:
        d["trace"] = {"sizeBytes": [4], "allocAt": [1], "freeAt": [0],
                      "category": ["ALLOCATION_CATEGORY_ACTIVATION"]}
    return {"fileName": f"{model}@{batch}", "model": model, "description": d,
            "maxMemoryMib": 5000.0, "status": "SUCCESSFUL", "measuredStatus": "OK"}


def _script(tmp_path, descriptions, constants="calibrated", out_name="clean.jsonl"):
    """The exporter on tmp_path/runs.jsonl with the descriptions' flags ("--descriptions
    FILE" or "--llm-descriptions DIR") and a one-GPU profile; (done, the output path)."""
    with open(tmp_path / "profiles.json", "w") as f:
        json.dump({"gpus": [{"id": "card", "context_mib": 700, "constants": constants}]},
                  f)
    out = tmp_path / out_name
    done = subprocess.run(
        [sys.executable, SCRIPT, "--gpu", "card", "--runs", str(tmp_path / "runs.jsonl"),
         *descriptions, "--profiles", str(tmp_path / "profiles.json"), "--out", str(out)],
        capture_output=True, text=True)
    return done, out


def _export(tmp_path, constants="calibrated"):
    _write(tmp_path / "runs.jsonl", [
        _run("a", 8), _run("b", 8, benchmark=True), _run("c", 8, cap=900.0),
        _run("d", 8, status="CRASHED"), _run("e", 8)])
    _write(tmp_path / "described.jsonl", [
        _described("a", 8), _described("a", 16), _described("b", 8), _described("c", 8),
        _described("d", 8), _described("e", 8, trace=False)])
    return _script(tmp_path, ["--descriptions", str(tmp_path / "described.jsonl")],
                   constants)


def test_only_clean_traced_runs_at_their_reserved_peak_plus_context(tmp_path):
    done, out = _export(tmp_path)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in open(out)]
    assert [r["fileName"] for r in rows] == ["a@8"]
    assert rows[0]["maxMemoryMib"] == 1200.0 + 700
    assert rows[0]["description"]["cudnnBenchmark"] is False  # As the run was.
    assert "1 clean runs on the card" in done.stderr
    assert "1 without a traced description" in done.stderr  # e@8


def test_an_assumed_context_is_refused(tmp_path):
    done, _ = _export(tmp_path, constants="assumed")
    assert done.returncode != 0
    assert "assumed, not measured" in done.stderr


def _export_one(tmp_path, run):
    """One run with its traced description, exported; (done, the exported row)."""
    _write(tmp_path / "runs.jsonl", [run])
    _write(tmp_path / "described.jsonl", [_described(run["model"], run["batch_size"])])
    done, out = _script(tmp_path, ["--descriptions", str(tmp_path / "described.jsonl")])
    assert done.returncode == 0, done.stderr
    return json.loads(open(out).readline())


def test_a_runs_own_context_is_its_process_peak(tmp_path):
    """A run that read its own context (NVML's per-process figure) is exported at its
    reserved peak plus that, not the profile's."""
    row = _export_one(tmp_path, dict(_run("a", 8), context_mib=634.0))
    assert row["maxMemoryMib"] == 1200.0 + 634


def test_a_run_records_the_stack_it_ran_on(tmp_path):
    """The description says the torch and CUDA the run used (its context's key), not
    the describing machine's."""
    d = _export_one(tmp_path, dict(_run("a", 8), torch="2.11.0+cu130"))["description"]
    assert d["frameworkVersion"] == "2.11.0"
    assert d["stack"] == {"moduleLoading": "LAZY", "cudaMajor": 13, "cudaVersion": "13.0"}


def test_decoder_fine_tunes_take_their_described_files(tmp_path):
    """measure_llm_finetune.py's rows, each with DIR/<model>_<config>_b<batch>_s<seq>.json;
    one without a description is left out by name."""
    rows = [{"model": "m", "config": "lora_bf16", "batch_size": 4, "seq_len": 128,
             "status": "OK", "first_reserved_mib": 100.0, "steady_reserved_mib": 90.0},
            {"model": "m", "config": "full_bf16", "batch_size": 4, "seq_len": 128,
             "status": "OK", "first_reserved_mib": 100.0, "steady_reserved_mib": 90.0},
            {"model": "m", "config": "full_fp32", "batch_size": 4, "seq_len": 128,
             "status": "OOM"}]
    _write(tmp_path / "runs.jsonl", rows)
    os.makedirs(tmp_path / "d")
    with open(tmp_path / "d" / "m_lora_bf16_b4_s128.json", "w") as f:
        json.dump({"name": "m", "batchSize": 4}, f)
    done, out = _script(tmp_path, ["--llm-descriptions", str(tmp_path / "d")],
                        out_name="llm.jsonl")
    assert done.returncode == 0, done.stderr
    exported = [json.loads(line) for line in open(out)]
    assert [r["fileName"] for r in exported] == ["m_lora_bf16_b4_s128"]
    assert exported[0]["maxMemoryMib"] == 100.0 + 700
    assert "m_full_bf16_b4_s128: no description" in done.stderr



def test_models_csv_names_each_clean_run_once_for_describe_timm(tmp_path):
    runs = [_run("a", 8), _run("a", 8), _run("b", 8, benchmark=True), _run("c", 16)]
    for r in runs:
        r["input_size"] = "3x224x224"
    _write(tmp_path / "runs.jsonl", runs)
    done, out = _script(tmp_path, ["--models-csv"], out_name="models.csv")
    assert done.returncode == 0, done.stderr
    lines = out.read_text().splitlines()
    assert lines[0] == "model,input_size,batch_size,max_gpu_memory_mib,status,faketensor_mib"
    assert lines[1:] == ["a,3x224x224,8,1200.0,OK,", "c,3x224x224,16,1200.0,OK,"]


def test_a_run_takes_the_first_descriptions_file_that_traced_it(tmp_path):
    _write(tmp_path / "runs.jsonl", [_run("a", 8), _run("b", 8)])
    here = _described("a", 8)
    here["description"]["name"] = "traced here"
    _write(tmp_path / "here.jsonl", [here, _described("b", 8, trace=False)])
    _write(tmp_path / "elsewhere.jsonl", [_described("a", 8), _described("b", 8)])
    done, out = _script(tmp_path, ["--descriptions", str(tmp_path / "here.jsonl"),
                                   "--descriptions", str(tmp_path / "elsewhere.jsonl")])
    assert done.returncode == 0, done.stderr
    rows = {r["model"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert rows["a"]["description"]["name"] == "traced here"
    assert rows["b"]["description"]["name"] == "b"
