"""python3 -m gpuest.describe: the happy path in a real process, bad input in-process."""
import json
import os
import subprocess
import sys

import pytest

from gpuest.describe.__main__ import main

from helpers import PYTHONPATH


def _run(*args):
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    return subprocess.run([sys.executable, "-m", "gpuest.describe", *args], env=env,
                          capture_output=True, text=True, timeout=300)


def test_help_tells_the_truth():
    r = _run("--help")
    assert r.returncode == 0
    for flag in ("--model", "--kwargs", "--input-shape", "--batch-size", "--optimizer",
                 "--dtype", "--amp", "--no-trace", "-o", "--input-dtype", "--loss",
                 "--cudnn-benchmark", "--no-cudnn-benchmark"):
        assert flag in r.stdout
    assert "sgd_momentum" in r.stdout and "bfloat16" in r.stdout
    assert "cross_entropy" in r.stdout and "vocab" in r.stdout


def test_describe_to_file(tmp_path):
    out = tmp_path / "r18.json"
    r = _run("--model", "torchvision.models:resnet18", "--kwargs", '{"num_classes": 10}',
             "--input-shape", "3,64,64", "--batch-size", "4", "--optimizer", "sgd",
             "-o", str(out))
    assert r.returncode == 0, r.stderr
    d = json.loads(out.read_text())
    assert d["family"] == "MODEL_FAMILY_CNN" and d["optimizer"] == "OPTIMIZER_SGD"
    assert d["inputShape"] == [3, 64, 64] and d["batchSize"] == 4
    assert d["layers"][-1]["outputActivations"] == 10 and "trace" in d
    assert "layers" in r.stderr  # a one-line summary goes to stderr


def test_no_trace_to_stdout(capsys):
    assert main(["--model", "torch.nn:Linear", "--kwargs", '{"in_features": 4, '
                 '"out_features": 2}', "--input-shape", "4", "--batch-size", "3",
                 "--no-trace"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert "trace" not in d and d["layers"] == [
        {"type": "Linear", "inputActivations": 4, "outputActivations": 2, "parameters": 10,
         "inputFrom": -2}]


@pytest.mark.parametrize("flag, recorded", [("--cudnn-benchmark", True),
                                            ("--no-cudnn-benchmark", False)])
def test_cudnn_benchmark_flags(flag, recorded, capsys):
    assert main(["--model", "torch.nn:Linear", "--kwargs", '{"in_features": 4, '
                 '"out_features": 2}', "--input-shape", "4", "--batch-size", "3",
                 "--no-trace", flag]) == 0
    assert json.loads(capsys.readouterr().out)["cudnnBenchmark"] is recorded


@pytest.mark.parametrize("argv, says", [
    (["--model", "no_such_module_xyz:f"], "cannot import"),
    (["--model", "torch.nn"], "MODULE:FACTORY"),
    (["--model", "torch.nn:NoSuchThing"], "no attribute"),
    (["--model", "torch.nn:Linear", "--kwargs", "{bad"], "not valid JSON"),
    (["--model", "torch.nn:Linear", "--kwargs", "[1]"], "JSON object"),
    (["--model", "torch.nn:Linear", "--kwargs", '{"in_features": 4}'], "failed"),
    (["--model", "torch:zeros", "--kwargs", '{"size": [2]}'], "not a torch.nn.Module"),
    (["--input-shape", "3,a"], "comma-separated"),
    (["--input-shape", "0,4"], "positive"),
    (["--batch-size", "0"], "positive"),
    (["--optimizer", "lion"], "invalid choice"),
    (["--dtype", "int8"], "invalid choice"),
])
def test_bad_input_exits_2(argv, says, capsys):
    base = {"--model": "torch.nn:Linear", "--kwargs": '{"in_features": 4, "out_features": 2}',
            "--input-shape": "4", "--batch-size": "2"}
    for flag, value in zip(argv[::2], argv[1::2]):
        base[flag] = value
    args = [x for kv in base.items() for x in kv]
    with pytest.raises(SystemExit) as e:
        main(args)
    assert e.value.code == 2
    assert says in capsys.readouterr().err
