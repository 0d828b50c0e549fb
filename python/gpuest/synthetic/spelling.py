"""Map a description's layer list (PyTorch class names) onto a dataset row's spelling.

This is how the cleaner scripts would have written the same layers: their names,
their zero parameters for activations, and the layer kinds they silently dropped
(pooling, Identity, Sigmoid in CNN rows). Transformer rows have no per-layer list.
"""
from __future__ import annotations

from typing import Iterable, List, Tuple

_MLP_NAMES = {"Linear": "linear", "BatchNorm1d": "batch_normalization", "Dropout": "dropout"}
_MLP_ACTS = {"ReLU", "Sigmoid", "Tanh", "LeakyReLU", "PReLU", "ELU", "SELU", "Softplus",
             "SiLU", "Mish", "GELU", "Identity", "Softmax"}
_CNN_NAMES = {"Conv2d": "conv2d", "BatchNorm2d": "batchnorm2d", "Dropout": "dropout",
              "AdaptiveAvgPool2d": "adaptive_avg_pool2d", "Linear": "linear",
              "Softmax": "softmax"}
_CNN_ACTS = {"ReLU", "LeakyReLU", "PReLU", "ELU", "SELU", "GELU", "Tanh", "SiLU",
             "Softplus", "Mish"}


def _fields(layer):
    if isinstance(layer, dict):  # protobuf-JSON form
        return (layer.get("type", ""), int(layer.get("outputActivations", 0)),
                int(layer.get("parameters", 0)))
    if isinstance(layer, tuple):
        return layer[:3]
    return layer.type, int(layer.output_activations), int(layer.parameters)


def describe_layers_to_dataset(family: str, layers: Iterable) -> List[Tuple[str, int, int]]:
    """``layers``: Layer messages, their JSON dicts, or (type, acts, params) tuples."""
    out = []
    for layer in layers:
        kind, acts, params = _fields(layer)
        if family == "mlp":
            if kind in _MLP_NAMES:
                out.append((_MLP_NAMES[kind], acts, 0 if kind == "Dropout" else params))
            elif kind in _MLP_ACTS:
                out.append((kind, acts, 0))
        elif family == "cnn":
            if kind in _CNN_NAMES:
                out.append((_CNN_NAMES[kind], acts, params))
            elif kind in _CNN_ACTS:
                out.append((kind, acts, 0))
        else:
            raise ValueError(f"no per-layer dataset spelling for family {family!r}")
    return out
