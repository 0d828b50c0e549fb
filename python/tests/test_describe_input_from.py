"""Layer.input_from: which tensor each layer reads, as the describer sees it by storage
(the layer rule then needs no guess by size)."""
import torch.nn as nn

from helpers import describe_dict


class _Residual(nn.Module):
    """conv, norm, in-place ReLU, conv, plus the block's input: the sum is made
    between modules."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(8, 8, 3, padding=1)
        self.norm = nn.BatchNorm2d(8)
        self.act = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(8, 8, 1)

    def forward(self, x):
        return self.conv2(self.act(self.norm(self.conv1(x)))) + x


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.block = _Residual()
        self.branch = nn.Conv2d(8, 8, 1)  # reads the stem's output again
        self.flatten = nn.Flatten()
        self.head = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        s = self.stem(x)
        return self.head(self.flatten(self.block(s) + self.branch(s)))


def test_each_layer_names_the_tensor_it_reads():
    d = describe_dict(_Net(), input_shape=(3, 8, 8), batch_size=4)
    sources = {layer["name"]: layer.get("inputFrom") for layer in d["layers"]}
    index = {layer["name"]: i for i, layer in enumerate(d["layers"])}
    assert sources["stem"] == -2  # the model's input
    assert sources["block.conv1"] == index["stem"]
    # The in-place ReLU wrote the norm's output: conv2 reads the ReLU's.
    assert sources["block.conv2"] == index["block.act"]
    # Read again, not the previous layer's output: the stem's.
    assert sources["branch"] == index["stem"]
    # The sum of the branches no module made.
    assert sources["flatten"] == -1
    assert sources["head"] == index["flatten"]


class _NormAct(nn.BatchNorm2d):
    """timm's BatchNormAct2d: a norm (its own weights) that returns its child's in-place
    activation of the normalized tensor."""

    def __init__(self, channels):
        super().__init__(channels)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.act(super().forward(x))


def test_a_tensor_a_child_wrote_stays_the_childs():
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), _NormAct(8), nn.Conv2d(8, 8, 1))
    d = describe_dict(net, input_shape=(3, 8, 8), batch_size=4)
    names = [layer["name"] for layer in d["layers"]]
    sources = [layer.get("inputFrom") for layer in d["layers"]]
    assert names == ["0", "1", "1.act", "2"]
    # The last convolution reads what the activation wrote in place, its row's tensor,
    # though the norm module returned it last.
    assert sources[3] == names.index("1.act")
