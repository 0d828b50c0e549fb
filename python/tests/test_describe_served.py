"""Descriptions with traces are accepted by the real gpuest-server through the gpuest CLI.

ctest sets GPUEST_SERVER, GPUEST_CLI and GPUEST_MODELS to what the build made; run by
hand, the tests use the repository's build/ and models/. Without them the tests fail:
a skip would let the suite pass without reaching a server.
"""
import json
import re
import os
import subprocess
import sys

import pytest
import torch.nn as nn
import torchvision

from helpers import PYTHONPATH, describe_dict
from server_process import ServerProcess

REPO = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLI = os.environ.get("GPUEST_CLI", os.path.join(REPO, "build", "client", "gpuest"))


class TextClassifier(nn.Module):
    def __init__(self, vocab=5000, d=128, heads=4, layers=2, classes=5):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, 0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        return self.head(self.encoder(self.embed(x)).mean(dim=1))


@pytest.fixture(scope="module")
def server():
    if not os.access(CLI, os.X_OK):
        pytest.fail(f"{CLI} is not built (or set GPUEST_CLI)")
    with ServerProcess() as running:
        yield running.target, running.workdir


def estimate(target, path):
    return subprocess.run([CLI, "--target", target, "estimate", "--json", path],
                          capture_output=True, text=True, timeout=60)


CASES = [
    ("resnet18", lambda: torchvision.models.resnet18(), dict(input_shape=(3, 224, 224), batch_size=8),
     "MODEL_FAMILY_CNN"),
    ("resnet50", lambda: torchvision.models.resnet50(), dict(input_shape=(3, 224, 224), batch_size=4),
     "MODEL_FAMILY_CNN"),
    ("mobilenet_v2", lambda: torchvision.models.mobilenet_v2(),
     dict(input_shape=(3, 224, 224), batch_size=8), "MODEL_FAMILY_CNN"),
    ("vit_b_16", lambda: torchvision.models.vit_b_16(), dict(input_shape=(3, 224, 224), batch_size=2),
     "MODEL_FAMILY_TRANSFORMER"),
    ("text_classifier", TextClassifier,
     dict(input_shape=(64,), input_dtype="int64", batch_size=16), "MODEL_FAMILY_TRANSFORMER"),
]


@pytest.mark.parametrize("name,factory,kwargs,family", CASES, ids=[c[0] for c in CASES])
def test_description_is_served(server, name, factory, kwargs, family):
    target, workdir = server
    d = describe_dict(factory(), name=name, **kwargs)
    assert "trace" in d and d["trace"]["sizeBytes"], d.get("traceUnavailableReason")
    path = os.path.join(workdir, f"{name}.json")
    with open(path, "w") as f:
        json.dump(d, f)
    r = estimate(target, path)
    assert r.returncode == 0, r.stderr
    response = json.loads(r.stdout)
    assert response["family"] == family
    assert int(response["recommendation"]["memoryBytes"]) > 0
    assert any(x["estimatorId"] == "horus" for x in response["results"])


class LstmLM(nn.Module):
    def __init__(self, vocab=2000, d=128, hidden=256):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, hidden, 2, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, x):
        return self.head(self.lstm(self.embed(x))[0])


@pytest.mark.parametrize("kwargs", [
    dict(loss="cross_entropy", cudnn_benchmark=False),
    dict(loss="cross_entropy", amp=True, cudnn_benchmark=True),
    dict(step=lambda model, batch: model(batch).float().logsumexp(-1).mean()),
], ids=["cross_entropy", "amp_cudnn_benchmark", "step_function"])
def test_new_description_fields_are_served(server, kwargs):
    """The loss, cudnn_benchmark (false included) and a recurrent, mixed-precision
    trace reach the real server's JSON parser and get an estimate."""
    target, workdir = server
    d = describe_dict(LstmLM(), input_shape=(64,), input_dtype="int64", batch_size=8,
                      name="lstm_lm", **kwargs)
    assert "trace" in d, d.get("traceUnavailableReason")
    assert d["loss"] == ("step_function" if "step" in kwargs else kwargs["loss"])
    # Not given and not turned on in this process: not recorded.
    assert d.get("cudnnBenchmark") is kwargs.get("cudnn_benchmark")
    path = os.path.join(workdir, "lstm_lm.json")
    with open(path, "w") as f:
        json.dump(d, f)
    r = estimate(target, path)
    assert r.returncode == 0, r.stderr
    assert int(json.loads(r.stdout)["recommendation"]["memoryBytes"]) > 0


def test_describe_cli_output_is_served(server):
    target, workdir = server
    out = os.path.join(workdir, "mlp.json")
    r = subprocess.run([sys.executable, "-m", "gpuest.describe", "--model",
                        "torchvision.models:resnet18", "--input-shape", "3,64,64",
                        "--batch-size", "4", "--loss", "cross_entropy",
                        "--cudnn-benchmark", "-o", out],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=PYTHONPATH))
    assert r.returncode == 0, r.stderr
    r = estimate(target, out)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["family"] == "MODEL_FAMILY_CNN"


def _estimate_on(target, workdir, d, name, gpu="a100-40gb"):
    """The real server's answer for description d on gpu, through the CLI."""
    path = os.path.join(workdir, f"{name}.json")
    with open(path, "w") as f:
        json.dump(d, f)
    r = subprocess.run([CLI, "--target", target, "--gpu", gpu, "estimate", "--json", path],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _allocsim(response):
    return next(x for x in response["results"] if x["estimatorId"] == "allocsim")


def _state_bytes(d):
    """The optimizer state a description's trace holds."""
    t = d["trace"]
    return sum(int(s) for s, c in zip(t["sizeBytes"], t["category"])
               if c == "ALLOCATION_CATEGORY_OPTIMIZER_STATE")


# The terms of the bound (basis): its population, intercept and factors.
_TERMS = re.compile(r"and the ([^()]+?) calibration, for the job's population \((.+?)\): upper "
                    r"\+(\d+) MiB \(.*?\), x([\d.]+) \(.*?\), \+ ([\d.]+) x the largest")

OPTIMIZER_CASES = [("resnet18", torchvision.models.resnet18),
                   ("mobilenet_v2", torchvision.models.mobilenet_v2),
                   ("resnet50", torchvision.models.resnet50)]


@pytest.mark.parametrize("name,factory", OPTIMIZER_CASES, ids=[c[0] for c in OPTIMIZER_CASES])
def test_a_real_cnns_bound_moves_with_its_optimizer_state_only(server, name, factory):
    """A torchvision CNN described with SGD with momentum and with Adam gets the real
    models' terms both times (the population is chosen by what the description shows,
    not by the optimizer): the two bounds differ by the factor times what Adam's second
    moment adds to the simulated reserved peak, and that is at most the state the trace
    adds (plus the allocator's segment rounding), nothing else."""
    target, workdir = server
    model = factory()
    kwargs = dict(input_shape=(3, 224, 224), batch_size=16, name=name)
    described = {opt: describe_dict(model, optimizer=opt, **kwargs)
                 for opt in ("sgd_momentum", "adam")}
    assert described["adam"]["modelSource"].startswith("torchvision.models.")
    extra = _state_bytes(described["adam"]) - _state_bytes(described["sgd_momentum"])
    params = sum(p.numel() for p in model.parameters())
    assert extra >= 4 * params  # Adam's second moment
    results = {opt: _allocsim(_estimate_on(target, workdir, d, f"{name}_{opt}"))
               for opt, d in described.items()}
    terms = {opt: _TERMS.search(r["basis"]) for opt, r in results.items()}
    for opt, m in terms.items():
        assert m, results[opt]["basis"]
        assert m.group(2).startswith("real: a named torchvision model"), m.group(2)
    assert terms["adam"].groups() == terms["sgd_momentum"].groups()
    factor = float(terms["adam"].group(4))
    upper = {opt: int(r["memory"]["upperBytes"]) for opt, r in results.items()}
    reserved = {opt: int(r["memory"]["reservedPeakBytes"]) for opt, r in results.items()}
    d_reserved = reserved["adam"] - reserved["sgd_momentum"]
    assert 0 <= d_reserved <= extra + 64 * 2**20, (d_reserved, extra)
    assert abs((upper["adam"] - upper["sgd_momentum"]) - factor * d_reserved) <= 2**20


def test_an_eager_job_on_a_lazy_calibrated_gpu_is_warned_of(server):
    """The A100's context was calibrated on GPUMemNet's lazy-loading runs: a job recorded
    with CUDA_MODULE_LOADING=EAGER takes it times the measured eager/lazy ratio, with a
    warning, never the lazy figure silently (docs/contexts.md, rule 3)."""
    target, workdir = server
    d = describe_dict(torchvision.models.resnet18(), input_shape=(3, 64, 64), batch_size=4,
                      optimizer="sgd_momentum", name="resnet18")
    d.setdefault("stack", {})["moduleLoading"] = "LAZY"
    d["stack"].pop("cudaMajor", None)
    d["stack"].pop("cudaVersion", None)
    lazy = _estimate_on(target, workdir, d, "resnet18_lazy")
    d["stack"]["moduleLoading"] = "EAGER"
    eager = _estimate_on(target, workdir, d, "resnet18_eager")

    def context_warnings(response):
        return [w["message"] for w in response.get("warnings", [])
                if w.get("code") == "WARNING_CODE_ASSUMED_GPU_CONSTANTS"
                and w.get("estimatorId") == "allocsim"]
    assert not context_warnings(lazy)
    [warning] = context_warnings(eager)
    assert "eager module loading" in warning and "x2.71 for eager loading" in warning, warning
    grown = int(_allocsim(eager)["memory"]["upperBytes"]) - int(_allocsim(lazy)["memory"]["upperBytes"])
    assert abs(grown - round(1429 * 2**20 * 2.71) + 1429 * 2**20) <= 2**20, grown
