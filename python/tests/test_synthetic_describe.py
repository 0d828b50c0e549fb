"""Rebuilt seed-dataset models, described: the description's layers are the row's."""
import random
from collections import Counter

import gpuest
from helpers import describe_dict
from gpuest.synthetic import (describe_layers_to_dataset, parse_config,
                              rebuild, row_layers)


def _pick(rows, n, seed=1):
    return random.Random(seed).sample(rows, n)


def test_mlp_rows(mlp_rows):
    for row in _pick(mlp_rows, 12):
        model, shape, batch, extra = rebuild("mlp", row, device="meta")
        d = describe_dict(model, input_shape=shape, batch_size=batch, trace=False)
        assert describe_layers_to_dataset("mlp", d["layers"]) == row_layers(row)
        assert d["family"] == "MODEL_FAMILY_MLP"
        # The dataset counts Identity (a drawn "activation") and the output Softmax
        # as activations; describe counts real activation functions only.
        if row["Activation Function"] not in ("Identity", "Softmax"):
            assert d["activationFunction"] == row["Activation Function"]


def test_cnn_rows_with_trace(cnn_rows):
    rows = [r for r in cnn_rows if parse_config(r)["input_size"] >= 7 and row_layers(r)]
    for row in _pick(rows, 8):
        model, shape, batch, _ = rebuild("cnn", row, device="meta")
        d = describe_dict(model, input_shape=shape, batch_size=batch)  # meta model: fine
        assert "trace" in d, d.get("traceUnavailableReason")
        assert describe_layers_to_dataset("cnn", d["layers"]) == row_layers(row)
        assert d["family"] == "MODEL_FAMILY_CNN"
        assert d["activationFunction"] == row["Activation Function"]


def test_transformer_rows(transformer_rows):
    for row in _pick(transformer_rows, 4):
        model, shape, batch, extra = rebuild("transformer", row, device="meta")
        d = describe_dict(model, input_shape=shape, batch_size=batch,
                          input_dtype=extra["input_dtype"], trace=False)
        counts = Counter(l["type"] for l in d["layers"])
        assert counts["Linear"] == int(row["linear_count"])
        assert counts["LayerNorm"] == int(row["layernorm_count"])
        assert counts["Dropout"] == int(row["dropout_count"])
        # The cleaner saw out_proj once per attention block; describe lists the block.
        assert counts["MultiheadAttention"] == int(row["ndq_linear_count"])
        assert d["sequenceLength"] == int(row["seq_length"])
        # The row's total leaves out what its cleaner could not see: attention input
        # projections, LayerNorm weights and the positional encoding.
        e, n, s = int(row["embedding_size"]), int(row["num_layers"]), int(row["seq_length"])
        unseen = n * (3 * e * e + 3 * e) + n * 2 * 2 * e + s * e
        total = sum(l.get("parameters", 0) for l in d["layers"])
        assert total - unseen == int(row["total_parameters"])
