"""Rebuild the synthetic models of the GPUMemNet seed dataset.

``parse_config`` reads a row's generator config (``config_file_name`` writes one),
``build_mlp``/``build_cnn``/``build_transformer`` rebuild the model as the original
generator did, ``rebuild`` does both for a row (choosing among the generator's
random draws), and ``dataset_layers`` records a model's layer list in the dataset's
own spelling.
"""
from .cnn import GeneratorCrash, build_cnn
from .config import config_file_name, config_keys, parse_config
from .mlp import build_mlp
from .rebuild import candidates, input_shape_of, matches_row, rebuild, row_layers
from .recorder import dataset_layers, transformer_totals
from .spelling import describe_layers_to_dataset
from .transformer import build_transformer

__all__ = [
    "GeneratorCrash", "parse_config", "config_file_name", "config_keys", "build_mlp",
    "build_cnn", "build_transformer", "rebuild",
    "candidates", "input_shape_of", "matches_row", "row_layers", "dataset_layers",
    "transformer_totals", "describe_layers_to_dataset",
]
