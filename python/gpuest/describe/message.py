"""ModelDescription: built in its protobuf-JSON form, returned as the message.

The dict is built to the letter of protobuf's JSON mapping for proto/gpuest/v1/
model.proto: lowerCamelCase field names, enums by name, default values left out
(as MessageToJson does), 64-bit integers as JSON numbers (which the parser accepts).
``to_message`` parses it strictly (an unknown key fails), so the two cannot drift.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, TYPE_CHECKING

from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from .._generated import missing_generated_modules

if TYPE_CHECKING:
    from gpuest.v1 import ModelDescription


def _model_description_class() -> "type[ModelDescription]":
    """The generated message class; an ImportError that says how to get it."""
    try:
        from gpuest.v1 import ModelDescription
    except ImportError as e:
        raise missing_generated_modules(e) from e
    return ModelDescription


def _put(d: Dict[str, Any], key: str, value) -> None:
    """Set ``key`` unless ``value`` is the proto3 default (JSON leaves those out)."""
    if value is None or value == "" or value == 0 or value == []:
        return
    d[key] = value


def layer_json(layer: dict) -> dict:
    d: Dict[str, Any] = {}
    _put(d, "type", layer["type"])
    _put(d, "inputActivations", int(layer.get("input_activations", 0)))
    _put(d, "outputActivations", int(layer["output_activations"]))
    _put(d, "parameters", int(layer["parameters"]))
    _put(d, "name", layer.get("name", ""))
    if layer.get("input_from") is not None:  # 0 is a layer, not the default
        d["inputFrom"] = int(layer["input_from"])
    _put(d, "inputOp", layer.get("input_op", ""))
    return d


def trace_json(sizes: Sequence[int], alloc_at: Sequence[int], free_at: Sequence[int],
               categories: Sequence[str], tracer: str, batch_size: int) -> dict:
    """The AllocationTrace; batch_size is the batch the step was traced at, the one
    batch the trace answers for (the server refuses a request for another)."""
    d: Dict[str, Any] = {}
    _put(d, "sizeBytes", [int(x) for x in sizes])
    _put(d, "allocAt", [int(x) for x in alloc_at])
    _put(d, "freeAt", [int(x) for x in free_at])
    _put(d, "category", list(categories))
    _put(d, "tracer", tracer)
    _put(d, "batchSize", int(batch_size))
    return d


def description_json(*, name: str, family: str, batch_size: int, input_shape: List[int],
                     sequence_length: int, layers: List[dict], activation_function: str,
                     optimizer: str, dtype: str, mixed_precision: bool,
                     framework_version: str, trace: Optional[dict],
                     trace_unavailable_reason: str,
                     allocator: Optional[dict] = None, loss: str = "",
                     cudnn_benchmark: Optional[bool] = None,
                     parallelism: Optional[dict] = None,
                     trace_caveats: Optional[List[str]] = None,
                     stack: Optional[dict] = None,
                     model_source: str = "") -> dict:
    d: Dict[str, Any] = {}
    _put(d, "name", name)
    _put(d, "family", family)
    _put(d, "batchSize", int(batch_size))
    _put(d, "inputShape", [int(x) for x in input_shape])
    _put(d, "sequenceLength", int(sequence_length))
    _put(d, "layers", [layer_json(l) for l in layers])
    _put(d, "activationFunction", activation_function)
    _put(d, "optimizer", optimizer)
    _put(d, "dtype", dtype)
    _put(d, "mixedPrecision", bool(mixed_precision))
    _put(d, "framework", "pytorch")
    _put(d, "frameworkVersion", framework_version)
    if trace is not None:
        d["trace"] = trace
    _put(d, "traceUnavailableReason", trace_unavailable_reason)
    if allocator:
        d["allocator"] = allocator
    _put(d, "loss", loss)
    if cudnn_benchmark is not None:  # proto3 optional: false is written, unset is not
        d["cudnnBenchmark"] = bool(cudnn_benchmark)
    if parallelism:
        d["parallelism"] = parallelism
    if trace_caveats:
        d["traceCaveats"] = list(trace_caveats)
    if stack:
        d["stack"] = stack
    _put(d, "modelSource", model_source[:MAX_MODEL_SOURCE])
    return d


# The server refuses a longer model_source (request_validation.cc).
MAX_MODEL_SOURCE = 256


def model_source(model: Any) -> str:
    """Where the model's code came from: its class's module and name
    ("torchvision.models.resnet:ResNet"). The server chooses the population whose
    measurements calibrate the job by it (a library's or the user's own model is a real
    one; gpuest.synthetic's, GPUMemNet's generator's, a synthetic one)."""
    cls = type(model)
    return f"{cls.__module__}:{cls.__qualname__}"[:MAX_MODEL_SOURCE]


def allocator_json(alloc_conf: Optional[str]) -> Optional[dict]:
    """The AllocatorSettings of a PYTORCH_CUDA_ALLOC_CONF string
    ("max_split_size_mb:128,expandable_segments:True"); None when it sets neither.
    Options the simulation does not model (garbage_collection_threshold, ...) are
    ignored; a malformed value raises ValueError."""
    if not alloc_conf:
        return None
    d: Dict[str, Any] = {}
    for item in alloc_conf.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition(":")
        key, value = key.strip(), value.strip()
        if not sep:
            raise ValueError(f"PYTORCH_CUDA_ALLOC_CONF item {item!r} is not key:value")
        if key == "max_split_size_mb":
            if not value.isdigit() or int(value) <= 20:
                raise ValueError(f"max_split_size_mb must be an integer above 20, got {value!r}")
            d["maxSplitSizeMb"] = int(value)
        elif key == "expandable_segments":
            if value not in ("True", "False"):
                raise ValueError(f"expandable_segments must be True or False, got {value!r}")
            _put(d, "expandableSegments", value == "True")
    return d or None


def to_message(d: dict) -> "ModelDescription":
    """The ModelDescription of its JSON form ``d``, parsed strictly."""
    return json_format.ParseDict(d, _model_description_class()())


_INT64_TYPES = frozenset({FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT64,
                          FieldDescriptor.TYPE_SINT64, FieldDescriptor.TYPE_FIXED64,
                          FieldDescriptor.TYPE_SFIXED64})


def _int64_as_numbers(message: Message, d: Dict[str, Any]) -> None:
    """MessageToDict writes 64-bit integers as strings; make them JSON numbers again,
    as describe always wrote them (every protobuf JSON parser takes both)."""
    for field, value in message.ListFields():
        key = field.json_name
        if key not in d:
            continue
        repeated = field.label == FieldDescriptor.LABEL_REPEATED
        if field.type in _INT64_TYPES:
            d[key] = [int(x) for x in d[key]] if repeated else int(d[key])
        elif field.message_type is not None and not field.message_type.GetOptions().map_entry:
            if repeated:
                for sub_message, sub_dict in zip(value, d[key]):
                    _int64_as_numbers(sub_message, sub_dict)
            else:
                _int64_as_numbers(value, d[key])


def as_json_dict(message: Message) -> Dict[str, Any]:
    """The protobuf-JSON form of a message (a ModelDescription from ``describe``, an
    EstimateResponse, ...): json_format's mapping, 64-bit integers as numbers."""
    d = json_format.MessageToDict(message)
    _int64_as_numbers(message, d)
    return d
