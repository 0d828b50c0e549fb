"""Activation names the GPUMemNet launchers draw, mapped to PyTorch modules."""
from __future__ import annotations

import torch.nn as nn

ACTIVATIONS = {
    "relu": nn.ReLU,
    "leaky_relu": nn.LeakyReLU,
    "prelu": nn.PReLU,
    "elu": nn.ELU,
    "selu": nn.SELU,
    "gelu": nn.GELU,
    "tanh": nn.Tanh,
    "swish": nn.SiLU,  # Swish is SiLU in PyTorch
    "softplus": nn.Softplus,
    "mish": nn.Mish,
    "identity": nn.Identity,  # MLP generator only
}


def make_activation(name: str, device=None, unknown: str = "error") -> nn.Module:
    """A fresh activation module. The MLP generator falls back to ReLU on an unknown
    name (``unknown="relu"``); the CNN generator raises (KeyError there)."""
    cls = ACTIVATIONS.get(name)
    if cls is None:
        if unknown == "relu":
            cls = nn.ReLU
        else:
            raise ValueError(f"unknown activation {name!r}")
    if cls is nn.PReLU:  # the only one with a parameter
        return nn.PReLU(device=device)
    return cls()
