"""The GPUMemNet MLP generator (its mlp_next.py), rebuilt layer for layer.

Only the model is rebuilt: training, data and summary printing stay out. ``device``
is passed to every layer so a test can build on ``meta`` without allocating weights.
"""
from __future__ import annotations

from typing import Optional

import torch.nn as nn

from .activations import make_activation

# The one random choice the generator makes inside the model: a single-output MLP
# ends in Sigmoid (classification) or Identity (regression), by random.choice.
OUTPUT_HEADS = ("sigmoid", "identity")


class MLP(nn.Module):
    """Same module tree, class name and layer order as the original ``MLP``."""

    def __init__(self, input_size, output_size, hidden_layers, architecture="pyramid",
                 activation="relu", dropout_rate=0.5, use_dropout=True, use_batch_norm=True,
                 output_head: Optional[str] = None, device=None):
        super().__init__()
        layers = []
        in_features = input_size

        def hidden(in_f, out_f):
            layers.append(nn.Linear(in_f, out_f, device=device))
            if use_batch_norm:
                layers.append(nn.BatchNorm1d(out_f, device=device))
            layers.append(make_activation(activation, device=device, unknown="relu"))
            if use_dropout:
                layers.append(nn.Dropout(dropout_rate))

        if architecture == "pyramid":
            for _ in range(hidden_layers):
                out_features = max(int(in_features * 0.5), output_size)
                hidden(in_features, out_features)
                in_features = out_features
        elif architecture == "uniform":
            for _ in range(hidden_layers):
                hidden(in_features, in_features)
        elif architecture == "bottleneck":
            for _ in range(hidden_layers):
                out_features = max(int(in_features * 0.5), output_size)
                hidden(in_features, out_features)
                in_features = out_features
            bottleneck_size = max(int(in_features * 0.5), output_size)
            hidden(in_features, bottleneck_size)
            in_features = bottleneck_size
        elif architecture == "gradual":
            decrement = (input_size - output_size) // hidden_layers
            for _ in range(hidden_layers):
                out_features = max(in_features - decrement, output_size)
                hidden(in_features, out_features)
                in_features = out_features
        else:
            raise ValueError(f"unknown MLP architecture {architecture!r}")

        layers.append(nn.Linear(in_features, output_size, device=device))
        if output_size == 1:
            head = output_head or "sigmoid"
            if head not in OUTPUT_HEADS:
                raise ValueError(f"output_head must be one of {OUTPUT_HEADS}")
            layers.append(nn.Sigmoid() if head == "sigmoid" else nn.Identity())
        else:
            layers.append(nn.Softmax(dim=1))
        self.model = nn.Sequential(*layers)

    def forward(self, x):
        x = x.view(x.size(0), -1)
        return self.model(x)


def build_mlp(cfg: dict, output_head: Optional[str] = None, device=None) -> MLP:
    """MLP for a parsed config (see ``parse_config``). ``output_head`` pins the
    Sigmoid/Identity draw for single-output models."""
    return MLP(cfg["input_size"], cfg["output_size"], cfg["depth"], cfg["architecture"],
               cfg["activation"], cfg["dropout_rate"], cfg["use_dropout"],
               cfg["use_batch_norm"], output_head=output_head, device=device)
