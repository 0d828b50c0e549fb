"""The layer lists of the GPUMemNet dataset, recorded the way the original did.

MLP and CNN rows: the generator printed a torchsummary table (forward hooks on every
module except Sequential, ModuleList and the model itself, a batch of 2, parameters
counted from ``weight`` and ``bias`` only), and a cleaner script turned the printed
lines into ``(type, activations per sample, params)`` with its own spellings and
regular expressions. Both steps are emulated here: the table lines are formatted as
torchsummary formats them and parsed with the cleaners' rules, so quirks carry over
(lines naming a ``*Block`` are skipped; pooling, Identity and Sigmoid vanish from CNN
rows; activations are recorded with 0 parameters even for PReLU).

Transformer rows: the cleaner parsed a hierarchical module print
(``(name): Linear(in_features=..), 16,512 params``) and derived activations as
``out_features x batch_size`` for linears, ``seq x batch x dim`` for the embedding,
and "the last value" for LayerNorm and Dropout. Parameters of MultiheadAttention's
in-projection, LayerNorm and the positional encoding are not counted there.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import List, Sequence, Tuple

import torch
import torch.nn as nn

LayerTuple = Tuple[str, int, int]


# --- torchsummary emulation -------------------------------------------------------

def torchsummary_lines(model: nn.Module, input_size: Sequence[int], device="meta") -> List[str]:
    """The layer lines torchsummary.summary(model, input_size) prints, computed by
    shape propagation on ``device`` (meta: no weights, no compute)."""
    records = []
    hooks = []

    def hook(module, inputs, output):
        if isinstance(output, (list, tuple)):
            shape = [[-1] + list(o.size())[1:] for o in output]
        else:
            shape = [-1] + list(output.size())[1:]
        params = 0
        for attr in ("weight", "bias"):
            t = getattr(module, attr, None)
            if t is not None and hasattr(t, "size"):
                params += int(torch.Size(t.size()).numel())
        records.append((type(module).__name__, shape, params))

    for m in model.modules():
        if not isinstance(m, (nn.Sequential, nn.ModuleList)) and m is not model:
            hooks.append(m.register_forward_hook(hook))
    try:
        with torch.no_grad():
            model(torch.rand(2, *input_size, device=device) if device != "meta"
                  else torch.empty(2, *input_size, device="meta"))
    finally:
        for h in hooks:
            h.remove()
    return ["{:>20}  {:>25} {:>15}".format(f"{name}-{i + 1}", str(shape), f"{params:,}")
            for i, (name, shape, params) in enumerate(records)]


_PARAMS_AT_END = re.compile(r"(\d{1,3}(?:,\d{3})*)$")
_SHAPE_4D = re.compile(r"\[\-1, (\d+), (\d+), (\d+)\]")
_SHAPE_3D = re.compile(r"\[\-1, (\d+), (\d+)\]")
_SHAPE_2D = re.compile(r"\[\-1, (\d+)\]")
_CNN_ACTS = re.compile(r"(ReLU|LeakyReLU|PReLU|ELU|SELU|GELU|Tanh|SiLU|Softplus|Mish)-\d+")
_MLP_ACTS = ("ReLU", "Sigmoid", "Tanh", "LeakyReLU", "PReLU", "ELU", "SELU", "Softplus",
             "SiLU", "Mish", "GELU", "Identity", "Softmax")


def _params(line):
    m = _PARAMS_AT_END.findall(line)
    return int(m[0].replace(",", "")) if m else None


def parse_mlp_lines(lines: Sequence[str]) -> List[LayerTuple]:
    """The MLP cleaner (data_cleaner_mlp step 2, the version that names layers)."""
    out = []
    for line in lines:
        shape = _SHAPE_2D.findall(line)
        if "Linear-" in line:
            p = _params(line)
            if shape and p is not None:
                out.append(("linear", int(shape[0]), p))
        elif "BatchNorm" in line:
            p = _params(line)
            if shape and p is not None:
                out.append(("batch_normalization", int(shape[0]), p))
        elif "Dropout" in line:
            if shape:
                out.append(("dropout", int(shape[0]), 0))
        elif any(a in line for a in _MLP_ACTS):
            name = re.findall(r"([A-Za-z]+)-\d+", line)
            if shape and name:
                out.append((name[0], int(shape[0]), 0))
    return out


def parse_cnn_lines(lines: Sequence[str]) -> List[LayerTuple]:
    """The CNN cleaner (data_cleaner_cnn_step1).

    Its last step takes the most common activation function; with none (a network
    without conv blocks, e.g. residual depth 1 or dense depth < 4) that raises, its
    catch-all handler returns an empty row, and so does this.
    """
    out = []
    saw_activation = False

    def chw(line):
        s = _SHAPE_4D.findall(line)
        return int(s[0][0]) * int(s[0][1]) * int(s[0][2]) if s else None

    for line in lines:
        if "Block" in line:
            continue
        if "Conv2d-" in line or "BatchNorm2d-" in line:
            a, p = chw(line), _params(line)
            if a is not None and p is not None:
                out.append(("conv2d" if "Conv2d-" in line else "batchnorm2d", a, p))
        elif "Dropout-" in line:
            a = chw(line)
            if a is not None:
                out.append(("dropout", a, 0))
        elif "AdaptiveAvgPool2d-" in line:
            s = _SHAPE_4D.findall(line) or _SHAPE_3D.findall(line) or _SHAPE_2D.findall(line)
            if s:
                c = s[0][0] if isinstance(s[0], tuple) else s[0]
                out.append(("adaptive_avg_pool2d", int(c), 0))  # channels only, as there
        elif "Linear-" in line:
            s, p = _SHAPE_2D.findall(line), _params(line)
            if s and p is not None:
                out.append(("linear", int(s[0]), p))
        elif "Softmax-" in line:
            s = _SHAPE_2D.findall(line)
            if s:
                out.append(("softmax", int(s[0]), 0))
        elif _CNN_ACTS.search(line):
            a = chw(line)
            if a is not None:
                out.append((_CNN_ACTS.findall(line)[0], a, 0))
                saw_activation = True
    return out if saw_activation else []


# --- hierarchical-print emulation (Transformer rows) --------------------------------

def hierarchical_lines(model: nn.Module) -> List[str]:
    """One line per module in registration order; leaves carry ``, N params``."""
    lines = []
    for name, m in model.named_modules():
        children = list(m.children())
        head = f"({name.rsplit('.', 1)[-1]}): " if name else ""
        if children:
            lines.append(f"{head}{type(m).__name__}(")
        else:
            n = sum(p.numel() for p in m.parameters())
            lines.append(f"{head}{type(m).__name__}({m.extra_repr()}), {n:,} params")
    return lines


def parse_transformer_lines(lines: Sequence[str], batch_size: int, seq_length: int
                            ) -> List[LayerTuple]:
    """The Transformer cleaner (data_cleaner_transformer_step1)."""
    out = []
    current = seq_length * batch_size
    emb = re.compile(r"Embedding\((\d+), (\d+)\),\s*([\d,]+)\s*params")
    ndq = re.compile(r"NonDynamicallyQuantizableLinear\(.*?\),\s*([\d,]+)\s*params")
    lin = re.compile(r"Linear\(.*?\),\s*([\d,]+)\s*params")
    feats = re.compile(r"in_features=(\d+),\s*out_features=(\d+)")
    for line in lines:
        m = emb.search(line)
        if m:
            current = seq_length * batch_size * int(m.group(2))
            out.append(("Embedding", current, int(m.group(3).replace(",", ""))))
            continue
        for kind, rx in (("NonDynamicallyQuantizableLinear", ndq), ("Linear", lin)):
            m = rx.search(line)
            if m:
                f = feats.search(line)
                if f:
                    current = int(f.group(2)) * batch_size
                out.append((kind, current, int(m.group(1).replace(",", ""))))
                break
        else:
            if "LayerNorm" in line:
                out.append(("LayerNorm", current, 0))
            elif "Dropout" in line:
                out.append(("Dropout", current, 0))
    return out


def transformer_totals(layers: Sequence[LayerTuple]) -> dict:
    """The Transformer CSV's summary columns, from a cleaner-style layer list."""
    counts = Counter(t for t, _, _ in layers)
    return {
        "depth": len(layers),
        "total_parameters": sum(p for _, _, p in layers),
        "total_activations": sum(a for _, a, _ in layers),
        "ndq_linear_count": counts["NonDynamicallyQuantizableLinear"],
        "linear_count": counts["Linear"],
        "layernorm_count": counts["LayerNorm"],
        "dropout_count": counts["Dropout"],
    }


# --- one entry point ---------------------------------------------------------------

def dataset_layers(family: str, model: nn.Module, input_shape: Sequence[int],
                   batch_size: int = None) -> List[LayerTuple]:
    """The layer list a dataset row of ``family`` would carry for ``model``.

    ``input_shape`` is per sample: ``(features,)`` for an MLP, ``(C, H, W)`` for a CNN,
    ``(seq_length,)`` for a Transformer (which also needs ``batch_size``: the cleaner
    multiplied it in). Models on the meta device are fine for all three.
    """
    device = _device_of(model)
    if family == "mlp":
        # The generator asked torchsummary for input_size=(1, features).
        return parse_mlp_lines(torchsummary_lines(model, (1, *input_shape), device))
    if family == "cnn":
        return parse_cnn_lines(torchsummary_lines(model, tuple(input_shape), device))
    if family == "transformer":
        if batch_size is None:
            raise ValueError("transformer rows need batch_size")
        return parse_transformer_lines(hierarchical_lines(model), batch_size, input_shape[0])
    raise ValueError(f"unknown family {family!r}")


def _device_of(model):
    for p in model.parameters():
        return "meta" if p.device.type == "meta" else p.device
    return "cpu"
