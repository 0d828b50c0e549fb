"""Describe a PyTorch model for gpuest: ``describe(model, input_shape=..., batch_size=...)``.

Also a command: ``python3 -m gpuest.describe --help``.
"""
from .api import DescribeError, describe
from .message import as_json_dict, load_model_pb2

__all__ = ["describe", "DescribeError", "as_json_dict", "load_model_pb2"]
