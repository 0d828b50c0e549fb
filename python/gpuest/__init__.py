"""gpuest's Python side: describe PyTorch models where they are written, and ask a
gpuest server what they need.

``gpuest.describe(model, input_shape=(3, 224, 224), batch_size=32)`` returns a
``gpuest.v1.ModelDescription`` (proto/gpuest/v1/model.proto); the same settings can be
kept in a ``gpuest.DescribeOptions`` and passed as ``options=``. ``gpuest.Client``
estimates it on a server. ``gpuest.v1`` holds the generated messages and stubs.
``gpuest.synthetic`` (optional, not imported here) rebuilds the models of the
GPUMemNet seed dataset. Importing gpuest imports neither torch (until ``describe`` is
called) nor grpc (until ``Client`` is used).
"""
import pkgutil
from typing import TYPE_CHECKING, Any

# In a build tree the generated gpuest.v1 lives in build/python/gpuest, a second
# directory of this package on sys.path; an installed wheel has it inside this one.
__path__ = pkgutil.extend_path(__path__, __name__)

from .describe import DescribeError, DescribeOptions, as_json_dict, describe  # noqa: E402

if TYPE_CHECKING:
    from .client import Client as Client
    from .client import GpuestError as GpuestError


def __getattr__(name: str) -> Any:
    if name in ("Client", "GpuestError"):
        from . import client
        return getattr(client, name)
    raise AttributeError(f"module 'gpuest' has no attribute {name!r}")


__all__ = ["Client", "GpuestError", "describe", "DescribeOptions", "DescribeError",
           "as_json_dict"]
