"""The rebuilt generators reproduce the seed dataset's recorded layers exactly.

A fixed-seed sample keeps this quick; GPUEST_FULL_DATASET=1 checks every row.
"""
import os
import random
from collections import defaultdict

import pytest

from gpuest.synthetic import (GeneratorCrash, build_cnn, dataset_layers, input_shape_of,
                              parse_config, rebuild, row_layers, transformer_totals)
from gpuest.synthetic.rebuild import row_transformer_totals

FULL = os.environ.get("GPUEST_FULL_DATASET") == "1"


def _sample(rows, n, key=None, seed=0):
    if FULL:
        return rows
    rng = random.Random(seed)
    if key is None:
        return rng.sample(rows, n)
    groups = defaultdict(list)
    for r in rows:
        groups[key(r)].append(r)
    per = max(1, n // len(groups))
    return [r for k in sorted(groups) for r in rng.sample(groups[k], min(per, len(groups[k])))]


def _arch(row):
    return parse_config(row)["architecture"]


def test_mlp_layers_match(mlp_rows):
    rows = _sample(mlp_rows, 60, key=_arch)
    assert len(rows) >= 60
    misses = []
    for row in rows:
        _, _, _, extra = rebuild("mlp", row, device="meta")
        if not extra["matched"]:
            misses.append(row["Filename"])
    assert not misses, misses[:3]


def test_mlp_single_output_heads(mlp_rows):
    """Single-output MLPs end in Sigmoid or Identity at random: both occur."""
    rows = [r for r in mlp_rows if parse_config(r)["output_size"] == 1]
    heads = set()
    for row in rows:
        _, _, _, extra = rebuild("mlp", row, device="meta")
        assert extra["matched"], row["Filename"]
        heads.add(extra["draws"]["output_head"])
    assert heads == {"sigmoid", "identity"}


def test_cnn_layers_match_every_arch(cnn_rows):
    buildable = [r for r in cnn_rows if parse_config(r)["input_size"] >= 7]
    rows = _sample(buildable, 63, key=_arch)
    assert {_arch(r) for r in rows} == {"pyramid", "uniform", "bottleneck", "gradual",
                                        "residual", "dense", "hourglass"}
    misses = []
    for row in rows:
        _, shape, batch, extra = rebuild("cnn", row, device="meta")
        assert shape == input_shape_of(extra["config"]) and batch == extra["config"]["batch_size"]
        if not extra["matched"]:
            misses.append(row["Filename"])
    assert not misses, misses[:3]


def test_cnn_dense_transition_draw(cnn_rows):
    """A dense row the generator built with its 'every 5 blocks' draw."""
    name = next(r for r in cnn_rows if r["Filename"].startswith(
        "input_channels:3_num_classes:") and "arch:dense" in r["Filename"]
        and _needs_second_draw(r))
    _, _, _, extra = rebuild("cnn", name, device="meta")
    assert extra["matched"] and extra["draws"] == {"dense_transition_by_depth": False}


def _needs_second_draw(row):
    cfg = parse_config(row)
    if cfg["input_size"] < 7:
        return False
    want = row_layers(row)
    first = dataset_layers("cnn", build_cnn(cfg, True, device="meta"), input_shape_of(cfg))
    return first != want


def test_cnn_rows_the_generator_could_not_build(cnn_rows, rows_source):
    """Inputs under 7 px crash the original (log2(0)): empty layer list, 0 MiB."""
    crashed = [r for r in cnn_rows if parse_config(r)["input_size"] < 7]
    assert len(crashed) == 54 if rows_source == "measured" else crashed
    for row in crashed:
        assert row_layers(row) == [] and row["Max GPU Memory (MiB)"] == "0"
        with pytest.raises(GeneratorCrash):
            rebuild("cnn", row, device="meta")


def test_cnn_conv_free_rows_are_empty(cnn_rows):
    """Networks without conv blocks (residual depth 1, dense depth < 4) have no
    activation; the cleaner's 'most common activation' then fails and it writes []."""
    rows = [r for r in cnn_rows if row_layers(r) == [] and parse_config(r)["input_size"] >= 7]
    assert rows
    for row in rows:
        model, _, _, extra = rebuild("cnn", row, device="meta")
        assert extra["matched"]
        assert not any(type(m).__name__ == "Conv2d" for m in model.modules())


def test_transformer_totals_match(transformer_rows):
    rows = transformer_rows  # all of them: about 2 s
    for row in rows:
        model, shape, batch, extra = rebuild("transformer", row, device="meta")
        got = transformer_totals(dataset_layers("transformer", model, shape, batch))
        assert got == row_transformer_totals(row), row["filename"]
        assert extra["matched"] and extra["sequence_length"] == int(row["seq_length"])


def test_rebuild_rejects_wrong_family(mlp_rows):
    with pytest.raises(ValueError):
        rebuild("cnn", mlp_rows[0], device="meta")
