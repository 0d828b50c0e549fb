"""Rebuild the model behind a GPUMemNet dataset row.

A row fixes the generator's arguments but not its few random draws inside the
model; ``candidates`` lists every way the generator could have built the row's
model, and ``rebuild`` picks the one whose recorded layer list equals the row's
(or the first, for rows without a list).
"""
from __future__ import annotations

import ast
from typing import Any, Iterator, Mapping, Optional, Tuple, Union

import torch
import torch.nn as nn

from .cnn import build_cnn
from .config import parse_config
from .mlp import OUTPUT_HEADS, build_mlp
from .recorder import dataset_layers, transformer_totals
from .transformer import build_transformer

Row = Union[str, Mapping[str, Any]]

TRANSFORMER_TOTAL_COLUMNS = ("depth", "total_parameters", "total_activations",
                             "ndq_linear_count", "linear_count", "layernorm_count",
                             "dropout_count")


def input_shape_of(cfg: dict) -> Tuple[int, ...]:
    """Per-sample input shape the generator fed the model."""
    if cfg["family"] == "mlp":
        return (cfg["input_size"],)
    if cfg["family"] == "cnn":
        return (cfg["input_channels"], cfg["input_size"], cfg["input_size"])
    return (cfg["seq_length"],)


def candidates(cfg: dict, device=None) -> Iterator[Tuple[nn.Module, dict]]:
    """Every model the generator could have built for ``cfg``, with the draws used."""
    fam = cfg["family"]
    if fam == "mlp":
        heads = OUTPUT_HEADS if cfg["output_size"] == 1 else (None,)
        for head in heads:
            yield build_mlp(cfg, output_head=head, device=device), {"output_head": head}
    elif fam == "cnn":
        # Only a dense network uses the first draw; no launcher run used pooling.
        draws = (True, False) if cfg["architecture"] == "dense" else (True,)
        for d in draws:
            yield (build_cnn(cfg, dense_transition_by_depth=d, device=device),
                   {"dense_transition_by_depth": d})
    elif fam == "transformer":
        yield build_transformer(cfg, device=device), {}
    else:
        raise ValueError(f"unknown family {fam!r}")


def row_layers(row: Mapping[str, Any]) -> Optional[list]:
    """The row's Activations-Params list as tuples, or None where it has none."""
    text = row.get("Activations-Params") if isinstance(row, Mapping) else None
    if not text:
        return None
    return [tuple(t) for t in ast.literal_eval(text)]


def row_transformer_totals(row: Mapping[str, Any]) -> dict:
    return {k: int(row[k]) for k in TRANSFORMER_TOTAL_COLUMNS}


def matches_row(family: str, model: nn.Module, cfg: dict, row: Mapping[str, Any]) -> bool:
    """Whether ``model`` records exactly what the row recorded."""
    shape = input_shape_of(cfg)
    if family == "transformer":
        got = transformer_totals(dataset_layers(family, model, shape, cfg["batch_size"]))
        return got == row_transformer_totals(row)
    want = row_layers(row)
    return want is not None and dataset_layers(family, model, shape) == want


def rebuild(family: Optional[str], row: Row, device=None
            ) -> Tuple[nn.Module, Tuple[int, ...], int, dict]:
    """``(model, per-sample input shape, batch size, extra)`` for one dataset row.

    ``row`` is a CSV row (mapping) or a bare file name. ``extra`` holds the parsed
    config (``config``), the random draws that were used (``draws``), whether the
    model reproduces the row's recorded layers (``matched``: True/False, or None when
    the row has nothing to compare), ``input_dtype`` (int64 token ids for
    Transformers) and ``sequence_length``. Build on ``device="meta"`` for big rows.

    Raises ``GeneratorCrash`` for configs the original generator could not build
    (CNN input smaller than 7 px); their rows hold an empty layer list and 0 MiB.
    """
    cfg = parse_config(row)
    if family is not None and family != cfg["family"]:
        raise ValueError(f"row is a {cfg['family']} row, not {family}")
    family = cfg["family"]
    comparable = isinstance(row, Mapping) and (
        family == "transformer" or row_layers(row) is not None)
    first = None
    chosen = None
    for model, draws in candidates(cfg, device=device):
        if first is None:
            first = (model, draws)
        if comparable and matches_row(family, model, cfg, row):
            chosen = (model, draws, True)
            break
    if chosen is None:
        chosen = (first[0], first[1], False if comparable else None)
    model, draws, matched = chosen
    extra = {
        "config": cfg,
        "draws": draws,
        "matched": matched,
        "input_dtype": torch.int64 if family == "transformer" else torch.float32,
        "sequence_length": cfg["seq_length"] if family == "transformer" else 0,
    }
    return model, input_shape_of(cfg), cfg["batch_size"], extra
