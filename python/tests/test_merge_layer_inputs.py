"""lab/data/merge_layer_inputs.py, run as the recalibration runs it: traced rows
gain their layers' inputs only where the two layer lists agree layer by layer."""
import json
import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "lab", "data",
                      "merge_layer_inputs.py")


def _row(name, layers, trace=True):
    d = {"name": name, "layers": layers}
    if trace:
        d["trace"] = {"sizeBytes": [4], "allocAt": [1], "freeAt": [0],
                      "category": ["ALLOCATION_CATEGORY_ACTIVATION"]}
    return {"fileName": name, "description": d, "maxMemoryMib": 1.0,
            "status": "SUCCESSFUL"}


def _write(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def test_inputs_join_only_layer_lists_that_agree(tmp_path):
    conv = {"name": "c", "type": "Conv2d", "outputActivations": 8, "parameters": 3}
    norm = {"name": "n", "type": "BatchNorm2d", "outputActivations": 8, "parameters": 2}
    traced = [_row("a", [conv, norm]), _row("b", [conv, norm]), _row("c", [conv])]
    # The sources too, 0 (the first layer) included.
    described = [_row("a", [dict(conv, inputActivations=4, inputFrom=-2),
                            dict(norm, inputActivations=24, inputFrom=0)],
                      trace=False),
                 # b's second layer differs (a batch-dependent count): b is left alone.
                 _row("b", [dict(conv, inputActivations=4),
                            dict(norm, outputActivations=16, inputActivations=24)],
                      trace=False)]
    _write(tmp_path / "traced.jsonl", traced)
    _write(tmp_path / "layers.jsonl", described)
    out = tmp_path / "merged.jsonl"
    done = subprocess.run([sys.executable, SCRIPT, "--traced", str(tmp_path / "traced.jsonl"),
                           "--layers", str(tmp_path / "layers.jsonl"), "--out", str(out)],
                          capture_output=True, text=True, check=True)
    assert "1 of 3 rows have their layers' inputs; 2 keep their layers" in done.stderr
    merged = [json.loads(line) for line in open(out)]
    assert [m["fileName"] for m in merged] == ["a", "b", "c"]
    assert [l.get("inputActivations") for l in merged[0]["description"]["layers"]] == [4, 24]
    assert [l.get("inputFrom") for l in merged[0]["description"]["layers"]] == [-2, 0]
    assert merged[0]["description"]["trace"] == traced[0]["description"]["trace"]
    assert merged[1]["description"]["layers"] == [conv, norm]
    assert merged[2]["description"]["layers"] == [conv]


def test_by_model_one_layer_list_serves_every_batch(tmp_path):
    conv = {"name": "c", "type": "Conv2d", "outputActivations": 8, "parameters": 3}
    traced = [dict(_row("m@8", [conv]), model="m"), dict(_row("m@16", [conv]), model="m"),
              dict(_row("n@8", [conv]), model="n")]
    described = [dict(_row("m@2", [dict(conv, inputActivations=4, inputFrom=-2)],
                           trace=False), model="m")]
    _write(tmp_path / "traced.jsonl", traced)
    _write(tmp_path / "layers.jsonl", described)
    out = tmp_path / "merged.jsonl"
    done = subprocess.run([sys.executable, SCRIPT, "--traced", str(tmp_path / "traced.jsonl"),
                           "--layers", str(tmp_path / "layers.jsonl"), "--out", str(out),
                           "--by-model"], capture_output=True, text=True, check=True)
    assert "2 of 3 rows have their layers' inputs" in done.stderr
    merged = [json.loads(line) for line in open(out)]
    assert [m["description"]["layers"][0].get("inputFrom") for m in merged] == [-2, -2, None]


def test_the_operation_that_made_an_input_travels_with_it(tmp_path):
    conv = {"name": "c", "type": "Conv2d", "outputActivations": 8, "parameters": 3}
    norm = {"name": "n", "type": "BatchNorm2d", "outputActivations": 8, "parameters": 2}
    _write(tmp_path / "traced.jsonl", [_row("a", [conv, norm])])
    _write(tmp_path / "layers.jsonl",
           [_row("a", [dict(conv, inputActivations=4, inputFrom=-2),
                       dict(norm, inputActivations=8, inputFrom=-1, inputOp="add")],
                 trace=False)])
    out = tmp_path / "merged.jsonl"
    subprocess.run([sys.executable, SCRIPT, "--traced", str(tmp_path / "traced.jsonl"),
                    "--layers", str(tmp_path / "layers.jsonl"), "--out", str(out)],
                   capture_output=True, text=True, check=True)
    layers = json.loads(open(out).readline())["description"]["layers"]
    assert [l.get("inputOp") for l in layers] == [None, "add"]
