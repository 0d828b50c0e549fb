"""Layer.input_from: which tensor each layer reads, as the describer sees it by storage
(the layer rule then needs no guess by size)."""
import torch
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
    # The sum of the branches no module made, and the function that made it.
    assert sources["flatten"] == -1
    assert d["layers"][index["flatten"]]["inputOp"] == "add"
    assert sources["head"] == index["flatten"]
    # A module's output needs no operation named.
    assert all("inputOp" not in layer for layer in d["layers"]
               if layer.get("inputFrom") != -1)


class _Gated(nn.Module):
    """A gated block: a product, a concatenation, an in-place sum and a product by a
    number between modules."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)
        self.c = nn.Linear(16, 8)
        self.d = nn.Linear(8, 8)
        self.e = nn.Linear(8, 4)

    def forward(self, x):
        g = self.a(x) * self.b(x)
        y = self.c(torch.cat([g, x], dim=1))
        y += x
        s = (self.d(y) * 2 + x).view(4, 8)  # a view keeps its base's maker
        return self.e(s)


def test_the_operation_that_made_an_input_no_module_made_is_named():
    d = describe_dict(_Gated(), input_shape=(8,), batch_size=4)
    ops = {layer["name"]: layer.get("inputOp") for layer in d["layers"]}
    # d reads c's output, which the in-place sum wrote again: by storage, c's row.
    assert ops == {"a": None, "b": None, "c": "cat", "d": None, "e": "add"}
    assert d["layers"][3]["inputFrom"] == 2


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
