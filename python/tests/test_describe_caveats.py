"""What the trace cannot see is said in the description and reaches the estimate as
a warning, never silently skipped (issue "llm")."""
import torch
import torch.nn as nn

import gpuest
from gpuest import v1
from helpers import describe_dict
from server_process import ServerProcess


class PackedLinear(nn.Module):
    """A GPTQ-style layer: 4-bit weights packed eight to an int32, unpacked per call."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.register_buffer("qweight", torch.zeros(n_in // 8, n_out, dtype=torch.int32))
        self.register_buffer("scales", torch.ones(n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        w = self.qweight.repeat_interleave(8, dim=0).float() * self.scales
        return x @ w + self.bias


class Flagged(nn.Parameter):
    """A weight kept as a tensor subclass, as bitsandbytes' Params4bit is."""


def _describe(model, **kwargs):
    return describe_dict(model, input_shape=(64,), batch_size=4, optimizer="adamw",
                         loss="mean", **kwargs)


def test_a_plain_model_has_no_caveats():
    assert "traceCaveats" not in _describe(nn.Linear(64, 64))


def test_packed_integer_weights_are_named():
    (caveat,) = _describe(nn.Sequential(PackedLinear(64, 64)))["traceCaveats"]
    assert caveat.startswith("1 integer weight tensors")


def test_subclassed_weights_are_named():
    layer = nn.Linear(64, 64)
    layer.weight = Flagged(layer.weight.detach())
    (caveat,) = _describe(layer)["traceCaveats"]
    assert "Flagged" in caveat


def test_the_server_passes_each_caveat_on_as_a_warning():
    model = gpuest.describe(nn.Sequential(PackedLinear(64, 64)), input_shape=(64,),
                            batch_size=4, optimizer="adamw", loss="mean")
    with ServerProcess() as server, gpuest.Client(server.target) as client:
        response = client.estimate(model)
    codes = [w.code for w in response.warnings]
    assert v1.WARNING_CODE_TRACE_CAVEAT in codes
    (warning,) = [w for w in response.warnings if w.code == v1.WARNING_CODE_TRACE_CAVEAT]
    assert "integer weight tensors" in warning.message


def test_a_compiled_model_is_traced_through_the_module_it_wraps():
    class OptimizedModule(nn.Module):  # torch._dynamo's wrapper, as torch.compile returns it
        def __init__(self, mod):
            super().__init__()
            self._orig_mod = mod

        def forward(self, *args):
            raise AssertionError("the compiled wrapper must not be traced")

    plain = _describe(nn.Linear(64, 64))
    d = _describe(OptimizedModule(nn.Linear(64, 64)))
    (caveat,) = d["traceCaveats"]
    assert "torch.compile" in caveat
    assert d["trace"]["sizeBytes"] == plain["trace"]["sizeBytes"]
