"""gpuest.Client: the gpuest server's calls from Python.

    client = gpuest.Client("10.0.0.5:50051,10.0.0.6:50051")
    response = client.estimate(description, gpu="a100-40gb")
    response.recommendation.memory_bytes

One channel, round-robin over the targets (as the C++ client: several IPv4 or [IPv6]
host:port addresses, or one target such as dns:///name:port that resolves to many);
every call has a deadline (``timeout``, 5 s unless given) and retries UNAVAILABLE with
backoff while the deadline leaves time; a failed call raises GpuestError with the
gRPC status code and, for INVALID_ARGUMENT, the request field the server named.

The calls are reads, so a retry never does anything twice. A service generated from a
proto file the build found (proto/gpuest/v1/placement.proto: check_placement,
rank_gpus) gets its methods here only where the build generated its module: see
_optional_stub.
"""
from __future__ import annotations

import importlib
import os
import random
import re
import time
from typing import Any, Callable, Mapping, Optional, Sequence, Union

import grpc
from google.protobuf import json_format
from google.protobuf.message import DecodeError

from ._generated import missing_generated_modules

try:
    from . import _health_pb2, _rpc_pb2
    from .v1 import (EstimateRequest, EstimateResponse, EstimatorStub, ListEstimatorsRequest,
                     ListEstimatorsResponse, ModelDescription)
except ImportError as e:
    raise missing_generated_modules(e) from e

DEFAULT_TARGET = "127.0.0.1:50051"
DEFAULT_TIMEOUT_S = 5.0
# Backoff between attempts after UNAVAILABLE: doubling from the first to the cap, each
# wait drawn from its upper half so that clients started together spread out.
FIRST_BACKOFF_S = 0.05
MAX_BACKOFF_S = 1.0
# What the last attempt is left at least: enough to reach a server that came back.
LAST_ATTEMPT_S = 0.02
# The server's default --max-message-size: a long trace fits.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024

# The standard health service's path (grpc.health.v1); the messages are the package's
# own copy (build_protos.py says why).
_HEALTH_CHECK = "/grpc.health.v1.Health/Check"

# The trailer that carries a google.rpc.Status with rich error details (gRPC's
# convention); the server puts a google.rpc.BadRequest naming the field in it for
# INVALID_ARGUMENT (server/status_util.h).
_STATUS_DETAILS = "grpc-status-details-bin"
_BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"


def _field_of(metadata: Any) -> Optional[str]:
    """The field the server's google.rpc.BadRequest names, or None."""
    for key, value in metadata or ():
        if key != _STATUS_DETAILS:
            continue
        try:
            status = _rpc_pb2.Status.FromString(value)
            for detail in status.details:
                if detail.type_url == _BAD_REQUEST:
                    violations = _rpc_pb2.BadRequest.FromString(detail.value).field_violations
                    return violations[0].field if violations else None
        except DecodeError:
            return None
    return None


class GpuestError(Exception):
    """A call that failed: ``code`` (a grpc.StatusCode), the server's ``details``, the
    request ``field`` it named (INVALID_ARGUMENT only, from the google.rpc.BadRequest in
    the call's rich error details; else None) and the ``method``."""

    def __init__(self, method: str, code: grpc.StatusCode, details: str,
                 metadata: Any = None):
        self.method = method
        self.code = code
        self.details = details
        self.field: Optional[str] = (_field_of(metadata)
                                     if code == grpc.StatusCode.INVALID_ARGUMENT else None)
        super().__init__(f"{method}: {code.name}: {details}")


def _optional_stub(proto: str, method: str) -> Optional[Callable[[grpc.Channel], Any]]:
    """The stub of the service in gpuest/v1/<proto>.proto that has ``method``, or None
    where the build generated no such module (the proto is not in this checkout)."""
    package = f"{__package__}.v1"
    try:
        messages = importlib.import_module(f"{package}.{proto}_pb2")
        stubs = importlib.import_module(f"{package}.{proto}_pb2_grpc")
    except ModuleNotFoundError as e:
        if e.name not in (f"{package}.{proto}_pb2", f"{package}.{proto}_pb2_grpc"):
            raise  # the module is there but broken: say so, do not hide its calls
        return None
    for service in messages.DESCRIPTOR.services_by_name.values():
        if method in service.methods_by_name:
            return getattr(stubs, service.name + "Stub")
    return None


_PlacementStub = _optional_stub("placement", "CheckPlacement")


def channel_target(targets: Union[str, Sequence[str]]) -> str:
    """One gRPC target for a list of "host:port" targets (or a comma-separated string):
    the ipv4:/ipv6: resolvers take several addresses, which round_robin balances."""
    items = [t.strip() for t in targets.split(",")] if isinstance(targets, str) \
        else list(targets)
    if not items:
        raise ValueError("targets: at least one is required")
    for i, t in enumerate(items):
        if not t:
            raise ValueError(f"targets[{i}]: is empty")
    if len(items) == 1:
        return items[0]
    if all(re.fullmatch(r"\d+\.\d+\.\d+\.\d+:\d+", t) for t in items):
        return "ipv4:" + ",".join(items)
    if all(re.fullmatch(r"\[[^\]]+\]:\d+", t) for t in items):
        return "ipv6:" + ",".join(items)
    raise ValueError("targets: several targets must all be IPv4 or all [IPv6] host:port "
                     "addresses; for host names give one DNS target (dns:///name:port) "
                     "and let it resolve to many")


class Client:
    """A client of one gpuest service (one or several servers behind ``targets``).

    ``targets``: "host:port", a comma-separated list, or a sequence of them (default:
    $GPUEST_TARGET, else 127.0.0.1:50051). ``timeout``: each call's default deadline
    in seconds, retries included. Use it as a context manager, or ``close()`` it.
    """

    def __init__(self, targets: Union[str, Sequence[str], None] = None, *,
                 timeout: float = DEFAULT_TIMEOUT_S,
                 max_message_bytes: int = MAX_MESSAGE_BYTES):
        if not timeout > 0:
            raise ValueError(f"timeout: must be positive, got {timeout}")
        if targets is None:
            targets = os.environ.get("GPUEST_TARGET") or DEFAULT_TARGET
        self.target = channel_target(targets)
        self.timeout = float(timeout)
        self._channel = grpc.insecure_channel(self.target, options=[
            ("grpc.lb_policy_name", "round_robin"),
            # Retries are this class's (below), bounded by the deadline; gRPC's own
            # would multiply them.
            ("grpc.enable_retries", 0),
            # Reconnect soon after a refused connection, so a retry can reach a server
            # that has just started or come back.
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", int(MAX_BACKOFF_S * 1000)),
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
        ])
        self._estimator = EstimatorStub(self._channel)
        self._health = self._channel.unary_unary(
            _HEALTH_CHECK,
            request_serializer=_health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=_health_pb2.HealthCheckResponse.FromString)
        self._placement = _PlacementStub(self._channel) if _PlacementStub else None

    def estimate(self, model: Union[ModelDescription, EstimateRequest, Mapping[str, Any]], *,
                 gpu: str = "", estimators: Sequence[str] = (),
                 timeout: Optional[float] = None) -> EstimateResponse:
        """Estimate one job: ``model`` is a ModelDescription (``gpuest.describe``'s), its
        JSON form as a dict (a description file, ``json.load``-ed), or a whole
        EstimateRequest. ``gpu`` (e.g. "a100-40gb") adds whether the job fits;
        ``estimators`` runs only those. The answer's ``recommendation`` is the figure
        to reserve."""
        if isinstance(model, EstimateRequest):
            if gpu or estimators:
                raise ValueError("gpu, estimators: give them in the EstimateRequest or as "
                                 "arguments with a ModelDescription, not both")
            request = model
        else:
            if isinstance(model, Mapping):
                model = json_format.ParseDict(model, ModelDescription())
            if not isinstance(model, ModelDescription):
                raise TypeError(f"model: a gpuest.v1.ModelDescription, its JSON dict or an "
                                f"EstimateRequest, not {type(model).__name__}")
            request = EstimateRequest(model=model, gpu=gpu, estimators=list(estimators))
        return self._call("Estimate", self._estimator.Estimate, request, timeout)

    def list_estimators(self, *, timeout: Optional[float] = None) -> ListEstimatorsResponse:
        """The loaded estimators: id, kind, family, version, held-out metrics."""
        return self._call("ListEstimators", self._estimator.ListEstimators,
                          ListEstimatorsRequest(), timeout)

    def health(self, service: str = "", *, timeout: Optional[float] = None) -> str:
        """The standard health check: "SERVING" or "NOT_SERVING" (a server draining
        before it stops), for the whole server or the named ``service``."""
        response = self._call("Health.Check", self._health,
                              _health_pb2.HealthCheckRequest(service=service), timeout)
        return _health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)

    # The placement calls, where the build generated the Placement service's module.
    if _PlacementStub is not None:
        def check_placement(self, request: Any, *, timeout: Optional[float] = None) -> Any:
            """Does the candidate job fit this GPU beside the jobs already on it, and how
            much will they slow each other (a CheckPlacementRequest)."""
            assert self._placement is not None
            return self._call("CheckPlacement", self._placement.CheckPlacement, request,
                              timeout)

        def rank_gpus(self, request: Any, *, timeout: Optional[float] = None) -> Any:
            """One job against every GPU model in the catalog (a RankGpusRequest)."""
            assert self._placement is not None
            return self._call("RankGpus", self._placement.RankGpus, request, timeout)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _call(self, method: str, rpc: Any, request: Any, timeout: Optional[float]) -> Any:
        """``rpc(request)`` within the deadline, retrying UNAVAILABLE (no server took the
        call) and a server-side CANCELLED (a server that dropped it while shutting down)."""
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout: must be positive, got {timeout}")
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        backoff = FIRST_BACKOFF_S
        while True:
            remaining = deadline - time.monotonic()
            try:
                return rpc(request, timeout=max(remaining, 0.001))
            except grpc.RpcError as e:
                code, details = e.code(), e.details() or ""
                if code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
                    raise GpuestError(method, code, details, e.trailing_metadata()) from None
                # The last wait is cut short so that one more attempt still fits before
                # the deadline: the call gives up at its deadline, not a backoff early.
                left = deadline - time.monotonic() - LAST_ATTEMPT_S
                if left <= 0:
                    raise GpuestError(method, grpc.StatusCode.UNAVAILABLE,
                                      f"{details} (target {self.target}; retried until the "
                                      f"deadline)") from None
                time.sleep(min(backoff * random.uniform(0.5, 1.0), left))
                backoff = min(backoff * 2, MAX_BACKOFF_S)
