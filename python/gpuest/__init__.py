"""gpuest's Python side: describe PyTorch models where they are written.

``gpuest.describe(model, input_shape=(3, 224, 224), batch_size=32)`` returns a
ModelDescription (see proto/gpuest/v1/model.proto); ``gpuest.synthetic`` rebuilds
the models of the GPUMemNet seed dataset.
"""
from .describe import describe  # noqa: F401  (the package's main entry point)

__all__ = ["describe"]
