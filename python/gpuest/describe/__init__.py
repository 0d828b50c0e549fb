"""Describe a PyTorch model for gpuest: ``describe(model, input_shape=..., batch_size=...)``,
or ``describe(model, options=DescribeOptions(input_shape=..., batch_size=...))``.

Also a command: ``gpuest-describe --help`` (or ``python3 -m gpuest.describe --help``).
Importing this package does not import torch (a scheduler that only asks a server
needs none); the first call of ``describe`` does.
"""
from typing import TYPE_CHECKING

from .errors import DescribeError
from .message import DescribeOptions, as_json_dict

if TYPE_CHECKING:
    from .api import describe as describe
else:
    def describe(model, *args, **kwargs):
        """Describe ``model`` for gpuest and return a ``gpuest.v1.ModelDescription``:
        see ``gpuest.describe.api.describe`` for the parameters."""
        from .api import describe as describe_with_torch
        return describe_with_torch(model, *args, **kwargs)

__all__ = ["describe", "DescribeOptions", "DescribeError", "as_json_dict"]
