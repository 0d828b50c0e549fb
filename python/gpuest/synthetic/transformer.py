"""The GPUMemNet Transformer generator (its transformer.py, 'standard' architecture),
rebuilt: token embedding + learned positional encoding, an nn.TransformerEncoder of
``num_layers`` standard layers (batch_first), mean over the sequence, a linear head."""
from __future__ import annotations

import torch
import torch.nn as nn


class TransformerModel(nn.Module):
    def __init__(self, input_size, embedding_size, num_layers, num_heads, ff_hidden_size,
                 dropout_rate, seq_length, output_size, device=None):
        super().__init__()
        if embedding_size % num_heads:
            # The original fails here too (MultiheadAttention asserts); say why plainly.
            raise ValueError(f"embedding_size {embedding_size} is not divisible by "
                             f"num_heads {num_heads}")
        self.embedding = nn.Embedding(input_size, embedding_size, device=device)
        self.positional_encoding = nn.Parameter(
            torch.zeros(1, seq_length, embedding_size, dtype=torch.float32, device=device))
        layer = nn.TransformerEncoderLayer(d_model=embedding_size, nhead=num_heads,
                                           dim_feedforward=ff_hidden_size,
                                           dropout=dropout_rate, batch_first=True,
                                           device=device)
        kwargs = {}
        if "enable_nested_tensor" in nn.TransformerEncoder.__init__.__code__.co_varnames:
            kwargs["enable_nested_tensor"] = False  # avoids a 2.x warning; no layout change
        self.model = nn.TransformerEncoder(layer, num_layers=num_layers, **kwargs)
        self.fc_out = nn.Linear(embedding_size, output_size, device=device)

    def forward(self, x):
        x = self.embedding(x) + self.positional_encoding
        x = self.model(x)
        x = x.mean(dim=1)
        return self.fc_out(x)


def build_transformer(cfg: dict, device=None) -> TransformerModel:
    """Transformer classifier for a parsed config (vocabulary = the file name's input_size)."""
    return TransformerModel(cfg["vocab_size"], cfg["embedding_size"], cfg["num_layers"],
                            cfg["num_heads"], cfg["ff_hidden_size"], cfg["dropout_rate"],
                            cfg["seq_length"], cfg["num_classes"], device=device)
