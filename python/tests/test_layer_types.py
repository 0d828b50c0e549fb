"""The layer-type table the describer shares with the server (layer_types.json), and
the family rule on real models: the same models as tests/unit/estimators/core/layer_types_test.cc."""
import json

import torch.nn as nn
import torchvision

from gpuest.describe import layer_types
from helpers import describe_dict


class LstmClassifier(nn.Module):
    def __init__(self, vocab=1000, dim=64, hidden=128, classes=5):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, hidden, num_layers=2, batch_first=True)
        self.fc = nn.Linear(hidden, classes)

    def forward(self, x):
        out, _ = self.lstm(self.emb(x))
        return self.fc(out[:, -1])


class GruRegressor(nn.Module):
    def __init__(self, features=16, hidden=64):
        super().__init__()
        self.gru = nn.GRU(features, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, 1)

    def forward(self, x):
        out, _ = self.gru(x)
        return self.fc(out[:, -1])


def _family(model, **kwargs):
    return describe_dict(model, batch_size=2, trace=False, **kwargs)["family"]


def test_vit_is_a_transformer_despite_its_patch_convolution():
    assert _family(torchvision.models.vit_b_16(), input_shape=(3, 224, 224)) \
        == "MODEL_FAMILY_TRANSFORMER"


def test_resnet_and_convnext_are_cnns():
    assert _family(torchvision.models.resnet18(), input_shape=(3, 224, 224)) \
        == "MODEL_FAMILY_CNN"
    # Layer norms and GELUs beside the convolutions do not make it a Transformer.
    assert _family(torchvision.models.convnext_tiny(), input_shape=(3, 224, 224)) \
        == "MODEL_FAMILY_CNN"


def test_recurrent_networks_are_other():
    assert _family(LstmClassifier(), input_shape=(32,), input_dtype="int64") \
        == "MODEL_FAMILY_OTHER"
    assert _family(GruRegressor(), input_shape=(20, 16)) == "MODEL_FAMILY_OTHER"


def test_an_mlp_needs_dense_layers():
    mlp = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(),
                        nn.Linear(16, 2))
    assert _family(mlp, input_shape=(8,)) == "MODEL_FAMILY_MLP"
    assert layer_types.infer_family(["ReLU", "Dropout"]) == "MODEL_FAMILY_OTHER"


def test_spellings_meet_their_canonical_names():
    assert layer_types.classify("batch_normalization").canonical == "BatchNorm1d"
    assert layer_types.classify("adaptive_avg_pool2d").canonical == "AdaptiveAvgPool2d"
    # GPT-2's Conv1D is a linear layer; torch's Conv1d, in any case, a convolution.
    assert layer_types.classify("Conv1D").kind == "linear"
    assert layer_types.classify("conv1d").kind == "conv"
    unknown = layer_types.classify("FancyCapsule")
    assert unknown.canonical == "FancyCapsule" and unknown.kind == "unknown"


def test_the_table_is_the_shared_file():
    path = layer_types.table_path()
    assert path.parts[-3:] == ("gpuest", "v1", "layer_types.json")
    with open(path) as f:
        table = json.load(f)
    kinds, saves = set(table["kinds"]), set(table["saves"])
    for t in table["types"]:
        assert t["kind"] in kinds and t["saves"] in saves, t
        assert layer_types.classify(t["name"]).canonical == t["name"]
