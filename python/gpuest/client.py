"""gpuest.Client: the gpuest server's calls from Python.

    client = gpuest.Client("10.0.0.5:50051,10.0.0.6:50051")
    response = client.estimate(description, gpu="a100-40gb")
    response.recommendation.memory_bytes

One channel, round-robin over the targets (as the C++ client: several IPv4 or [IPv6]
host:port addresses, or one target such as dns:///name:port that resolves to many);
every call has a deadline (``timeout``, else DEFAULT_TIMEOUT_S), waits for a reachable
server up to it and retries UNAVAILABLE: the deadline and retry policy of the C++
client, read from the same file (proto/gpuest/v1/client_policy.json, shipped as
gpuest/v1/client_policy.json) and applied by gRPC itself. A failed call raises
GpuestError with the gRPC status code and, for INVALID_ARGUMENT, the request field the
server named.

The calls are reads, so a retry never does anything twice. A service generated from a
proto file the build found (proto/gpuest/v1/placement.proto: check_placement,
rank_gpus) gets its methods here only where the build generated its module: see
_optional_stub.
"""
from __future__ import annotations

import copy
import importlib
import json
import os
import queue
import re
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Union

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


def policy_path() -> Path:
    """Where the client policy is: in an installed package, gpuest/v1/client_policy.json
    (copied there from proto/ when the wheel was built); in the repository's checkout,
    which has no gpuest/v1 beside this module, proto/gpuest/v1 itself."""
    here = Path(__file__).resolve()
    shipped = here.parent / "v1" / "client_policy.json"
    if shipped.is_file():
        return shipped
    return here.parents[2] / "proto" / "gpuest" / "v1" / "client_policy.json"


def _read_policy(path: Path) -> Dict[str, Any]:
    """The policy file, read as strictly as the C++ client reads it: a key missing or
    unknown, or a value of the wrong type, is an error naming the key. The service
    config is gRPC's to check."""
    with open(path) as f:
        policy = json.load(f)

    kinds: Dict[str, Any] = {"an object": dict, "a number": (int, float), "an integer": int}

    def check(obj: Any, where: str, want: Dict[str, str]) -> None:
        """obj is an object of exactly the keys of want, each of the kind named."""
        def at(key: str) -> str:
            return f"'{where}.{key}'" if where else f"'{key}'"
        if not isinstance(obj, dict):
            raise ValueError(f"{path}: '{where}' must be a JSON object")
        unknown = sorted(obj.keys() - want.keys())
        if unknown:
            raise ValueError(f"{path}: {at(unknown[0])} is not a known key")
        for key, kind in want.items():
            if key not in obj:
                raise ValueError(f"{path}: {at(key)} is missing")
            if not isinstance(obj[key], kinds[kind]) or isinstance(obj[key], bool):
                raise ValueError(f"{path}: {at(key)} must be {kind}")

    check(policy, "", {"doc": "an object", "defaultDeadlineSeconds": "a number",
                       "reconnectBackoffMs": "an object", "serviceConfig": "an object"})
    check(policy["reconnectBackoffMs"], "reconnectBackoffMs",
          {"initial": "an integer", "min": "an integer", "max": "an integer"})
    if not policy["defaultDeadlineSeconds"] > 0:
        raise ValueError(f"{path}: 'defaultDeadlineSeconds' must be positive")
    backoff = policy["reconnectBackoffMs"]
    if not 0 < backoff["min"] <= backoff["initial"] <= backoff["max"]:
        raise ValueError(f"{path}: 'reconnectBackoffMs' must hold 0 < min <= initial <= max")
    return policy


_POLICY = _read_policy(policy_path())
# A call's deadline when it is given none, in seconds (client_policy.json says why).
DEFAULT_TIMEOUT_S = float(_POLICY["defaultDeadlineSeconds"])
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


class _PreparedRequests:
    """Each description dict, turned into the bytes of its EstimateRequest once: a
    scheduler estimates the same few jobs again and again, and parsing a dict with a
    trace of thousands of events into a message costs far more than the call itself.
    A dict is known by its identity and checked by equality with a copy kept of it, so
    one changed since it was prepared is prepared again, never sent as it was."""

    def __init__(self, entries: int = 16):
        self._entries = entries
        self._cache: "OrderedDict[tuple, tuple]" = OrderedDict()

    def bytes_of(self, model: Mapping[str, Any], gpu: str,
                 estimators: Sequence[str]) -> bytes:
        key = (id(model), gpu, tuple(estimators))
        hit = self._cache.get(key)
        if hit is not None and hit[0] == model:
            self._cache.move_to_end(key)
            return hit[1]
        request = EstimateRequest(model=json_format.ParseDict(model, ModelDescription()),
                                  gpu=gpu, estimators=list(estimators))
        self._cache[key] = (copy.deepcopy(model), request.SerializeToString())
        if len(self._cache) > self._entries:
            self._cache.popitem(last=False)
        return self._cache[key][1]


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
        backoff = _POLICY["reconnectBackoffMs"]
        self._channel = grpc.insecure_channel(self.target, options=[
            # Round robin, wait-for-ready and the retry policy: gRPC retries within the
            # deadline, and an attempt made while no server is reachable waits for one.
            ("grpc.service_config", json.dumps(_POLICY["serviceConfig"])),
            ("grpc.initial_reconnect_backoff_ms", backoff["initial"]),
            ("grpc.min_reconnect_backoff_ms", backoff["min"]),
            ("grpc.max_reconnect_backoff_ms", backoff["max"]),
            # A retry resends the request from gRPC's copy, which it keeps only up to
            # this size (256 KiB by default: a long trace would not be retried).
            ("grpc.per_rpc_retry_buffer_size", max_message_bytes),
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
        ])
        self._estimator = EstimatorStub(self._channel)
        # Estimate with a request already serialized (a prepared dict's).
        service = EstimateRequest.DESCRIPTOR.file.services_by_name["Estimator"]
        self._estimate_bytes = self._channel.unary_unary(
            f"/{service.full_name}/Estimate", request_serializer=None,
            response_deserializer=EstimateResponse.FromString)
        self._prepared = _PreparedRequests()
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
        to reserve. A dict is parsed once and its request kept (for the same dict,
        unchanged, with the same gpu and estimators): estimating it again costs what a
        message costs."""
        if isinstance(model, EstimateRequest):
            if gpu or estimators:
                raise ValueError("gpu, estimators: give them in the EstimateRequest or as "
                                 "arguments with a ModelDescription, not both")
            request = model
        else:
            if isinstance(model, Mapping):
                prepared = self._prepared.bytes_of(model, gpu, estimators)
                return self._call("Estimate", self._estimate_bytes, prepared, timeout)
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

    def _connected(self) -> bool:
        """Whether the channel is connected (READY) now, as the C++ client asks its
        channel. Python's gRPC tells the state only to a subscriber, on a thread of its
        own: subscribed for the first report only, as a lasting subscription's thread
        raises when an unclosed client is collected."""
        reports: "queue.Queue[grpc.ChannelConnectivity]" = queue.Queue()
        report = reports.put
        self._channel.subscribe(report, try_to_connect=False)
        try:
            return reports.get(timeout=1.0) == grpc.ChannelConnectivity.READY
        except queue.Empty:
            return False
        finally:
            self._channel.unsubscribe(report)

    def _call(self, method: str, rpc: Any, request: Any, timeout: Optional[float]) -> Any:
        """``rpc(request)`` within the deadline; gRPC waits and retries (the policy)."""
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout: must be positive, got {timeout}")
        try:
            return rpc(request, timeout=timeout if timeout is not None else self.timeout)
        except grpc.RpcError as e:
            code, details = e.code(), e.details() or ""
            # Calls wait for a reachable server: a deadline that passed with no
            # connection means no server was there, not a slow answer.
            if code == grpc.StatusCode.DEADLINE_EXCEEDED and not self._connected():
                raise GpuestError(method, grpc.StatusCode.UNAVAILABLE,
                                  f"no server was reachable at {self.target} before the "
                                  f"deadline: {details}") from None
            # The client gives callers no way to cancel, so a CANCELLED came from the
            # server, typically a call that raced its shutdown.
            if code == grpc.StatusCode.CANCELLED:
                raise GpuestError(method, grpc.StatusCode.UNAVAILABLE,
                                  f"the server cancelled the call (shutting down?): "
                                  f"{details}") from None
            raise GpuestError(method, code, details, e.trailing_metadata()) from None
