"""describe() on real architectures, each with an allocation trace."""
import torch
import torch.nn as nn
import torchvision

from helpers import bytes_by_category, check_trace_shape, live_curve, describe_dict


def _check(model, d, batch, optimizer_state_factor=2):
    assert "traceUnavailableReason" not in d, d.get("traceUnavailableReason")
    trace = d["trace"]
    check_trace_shape(trace)
    n_params = sum(p.numel() for p in model.parameters())
    # Layers add up to the model (parameters of unexecuted submodules credited upward).
    assert sum(l.get("parameters", 0) for l in d["layers"]) == n_params
    assert all(l["type"] and l.get("outputActivations", 0) >= 0 for l in d["layers"])
    state_bytes = sum(t.numel() * t.element_size()
                      for t in list(model.parameters()) + list(model.buffers()))
    by_cat = bytes_by_category(trace)
    assert by_cat["PARAMETER"] == state_bytes
    assert by_cat["GRADIENT"] == n_params * 4
    assert by_cat["OPTIMIZER_STATE"] == optimizer_state_factor * n_params * 4
    assert by_cat["ACTIVATION"] > 0
    curve, peak = live_curve(trace)
    # At the end: model state, gradients, optimizer state and the batch.
    assert curve[-1] == state_bytes + by_cat["GRADIENT"] + by_cat["OPTIMIZER_STATE"] + by_cat["INPUT"]
    assert peak > curve[-1]
    assert d["batchSize"] == batch and d["framework"] == "pytorch"
    assert d["dtype"] == "DTYPE_FLOAT32" and d["optimizer"] == "OPTIMIZER_ADAMW"


def test_resnet18():
    m = torchvision.models.resnet18()
    d = describe_dict(m, input_shape=(3, 224, 224), batch_size=4)
    _check(m, d, 4)
    assert d["family"] == "MODEL_FAMILY_CNN" and d["activationFunction"] == "ReLU"
    assert d["inputShape"] == [3, 224, 224]
    assert d["layers"][0] == {"type": "Conv2d", "inputActivations": 3 * 224 * 224,
                              "outputActivations": 64 * 112 * 112,
                              "parameters": 9408, "name": "conv1", "inputFrom": -2}


def test_each_layer_gives_its_input_so_a_concatenation_between_modules_shows():
    # torchvision's DenseNet concatenates every earlier feature map before each dense
    # layer's first norm: a torch.cat, not a module, so only the layer's own input
    # shows how large the tensor it keeps for backward is.
    m = torchvision.models.densenet121()
    d = describe_dict(m, input_shape=(3, 64, 64), batch_size=2)
    layers = {l["name"]: l for l in d["layers"]}
    first = layers["features.denseblock1.denselayer1.norm1"]
    fourth = layers["features.denseblock1.denselayer4.norm1"]
    spatial = 16 * 16  # 64 px, stride-2 conv, stride-2 max pool
    assert first["inputActivations"] == 64 * spatial
    # 64 channels from the stem and 32 from each of the three layers before it.
    assert fourth["inputActivations"] == (64 + 3 * 32) * spatial
    previous = d["layers"][d["layers"].index(fourth) - 1]
    assert previous["outputActivations"] == 32 * spatial


def test_resnet50_batch32():
    # The 2 s goal is measured by python/bench/bench_describe.py, not asserted here.
    m = torchvision.models.resnet50()
    d = describe_dict(m, input_shape=(3, 224, 224), batch_size=32)
    _check(m, d, 32)
    # Saved activations of ResNet-50 at batch 32 are a few GiB, not MiB or TiB.
    assert 1 << 30 < bytes_by_category(d["trace"])["ACTIVATION"] < 8 << 30


def test_mobilenet_v2():
    m = torchvision.models.mobilenet_v2()
    d = describe_dict(m, input_shape=(3, 224, 224), batch_size=2)
    _check(m, d, 2)
    assert d["family"] == "MODEL_FAMILY_CNN" and d["activationFunction"] == "ReLU6"


def test_vit_b_16():
    m = torchvision.models.vit_b_16()
    d = describe_dict(m, input_shape=(3, 224, 224), batch_size=2)
    _check(m, d, 2)
    assert d["family"] == "MODEL_FAMILY_TRANSFORMER"  # attention outranks the patch conv
    assert d["activationFunction"] == "GELU"
    types = [l["type"] for l in d["layers"]]
    assert types.count("MultiheadAttention") == 12


class TextClassifier(nn.Module):
    def __init__(self, vocab=1000, dim=64, layers=2, classes=5):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.enc = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(dim, 4, 128, batch_first=True), layers)
        self.fc = nn.Linear(dim, classes)

    def forward(self, x):
        return self.fc(self.enc(self.emb(x)).mean(1))


def test_transformer_encoder_classifier():
    m = TextClassifier()
    d = describe_dict(m, input_shape=(32,), batch_size=8, input_dtype="int64")
    _check(m, d, 8)
    assert d["family"] == "MODEL_FAMILY_TRANSFORMER"
    assert d["sequenceLength"] == 32 and d["activationFunction"] == "ReLU"
    # MultiheadAttention carries its in- and out-projections.
    mha = next(l for l in d["layers"] if l["type"] == "MultiheadAttention")
    assert mha["parameters"] == 4 * 64 * 64 + 4 * 64
    # Token ids stay int64: 8 x 32 x 8 bytes, plus the int64 labels.
    assert bytes_by_category(d["trace"])["INPUT"] == 8 * 32 * 8 + 8 * 8


def test_example_inputs_resized_to_batch():
    m = TextClassifier()
    d = describe_dict(m, example_inputs=torch.zeros(2, 16, dtype=torch.long), batch_size=6)
    assert d["batchSize"] == 6 and d["inputShape"] == [16] and d["sequenceLength"] == 16


def test_model_left_untouched():
    m = torchvision.models.resnet18().eval()
    before = {k: v.clone() for k, v in m.state_dict().items()}
    describe_dict(m, input_shape=(3, 64, 64), batch_size=2)
    assert not m.training
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())
    assert all(type(p) is nn.Parameter for p in m.parameters())
    assert not any(mod._forward_hooks or mod._forward_pre_hooks for mod in m.modules())


def test_mixed_precision_and_half():
    m = torchvision.models.resnet18()
    fp32 = describe_dict(m, input_shape=(3, 64, 64), batch_size=4)
    amp = describe_dict(m, input_shape=(3, 64, 64), batch_size=4, amp=True)
    half = describe_dict(m, input_shape=(3, 64, 64), batch_size=4, dtype="float16")
    assert amp["mixedPrecision"] is True and half["dtype"] == "DTYPE_FLOAT16"
    act = lambda d: bytes_by_category(d["trace"])["ACTIVATION"]
    n_params = sum(p.numel() for p in m.parameters())
    # AMP saves 16-bit activations, but also the 16-bit weight copies autocast makes.
    assert act(amp) - 2 * n_params < act(fp32)
    assert act(half) < act(fp32)
    assert bytes_by_category(half["trace"])["PARAMETER"] < bytes_by_category(fp32["trace"])["PARAMETER"]


class DataDependent(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        y = self.fc(x)
        torch.nonzero(y > 0)  # output shape depends on values: no fake kernel can say
        return y


def test_untraceable_model_keeps_layers_and_says_why():
    d = describe_dict(DataDependent(), input_shape=(4,), batch_size=8)
    assert "trace" not in d
    assert "nonzero" in d["traceUnavailableReason"]
    assert d["layers"] == [{"type": "Linear", "inputActivations": 4, "outputActivations": 3,
                            "parameters": 15, "name": "fc", "inputFrom": -2}]
    assert d["family"] == "MODEL_FAMILY_MLP"


def test_no_trace():
    d = describe_dict(TextClassifier(), input_shape=(8,), batch_size=2,
                      input_dtype="int64", trace=False)
    assert "trace" not in d and d["traceUnavailableReason"] == "tracing was turned off"
    assert d["layers"]
