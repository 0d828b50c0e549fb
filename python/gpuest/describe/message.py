"""ModelDescription: what describe is asked for (DescribeOptions), and the message
built in its protobuf-JSON form, returned as the message.

The dict is built to the letter of protobuf's JSON mapping for proto/gpuest/v1/
model.proto: lowerCamelCase field names, enums by name, default values left out
(as MessageToJson does), 64-bit integers as JSON numbers (which the parser accepts).
``to_message`` parses it strictly (an unknown key fails), so the two cannot drift.
Nothing here imports torch, so that ``import gpuest`` does not.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import (Any, Callable, Dict, List, Mapping, Optional, Sequence, TYPE_CHECKING,
                    Union)

from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from .._generated import missing_generated_modules

if TYPE_CHECKING:
    import torch

    from gpuest.v1 import ModelDescription


@dataclass(frozen=True)
class DescribeOptions:
    """What to describe a model at: its input, the training step to trace, the job's
    settings. The fields are describe's parameters (``gpuest.describe.api.describe_json``
    says what each means) and these defaults are its only defaults; describe checks the
    values when it runs. The first seven stay first, in this order: describe takes them
    by position too."""
    input_shape: Optional[Sequence[int]] = None
    example_inputs: Any = None
    batch_size: Optional[int] = None
    optimizer: str = "adamw"
    dtype: str = "float32"
    amp: Union[bool, str] = False
    trace: bool = True
    input_dtype: Union[str, torch.dtype, None] = None
    name: Optional[str] = None
    sequence_length: Optional[int] = None
    alloc_conf: Optional[str] = None
    loss: str = "auto"
    step: Optional[Callable] = None
    cudnn_benchmark: Optional[bool] = None
    parallelism: Optional[Mapping[str, Any]] = None
    gradient_accumulation: int = 1
    optimizer_impl: str = "foreach"


@dataclass(frozen=True)
class DescriptionFields:
    """A ModelDescription's contents as describe settled them (enums by name, the loss
    that was traced, the per-sample input shape), for ``description_json`` to write."""
    name: str
    family: str
    batch_size: int
    input_shape: List[int]
    sequence_length: int
    layers: List[dict]
    activation_function: str
    optimizer: str
    dtype: str
    mixed_precision: bool
    framework_version: str
    trace: Optional[dict]
    trace_unavailable_reason: str
    allocator: Optional[dict]
    loss: str
    cudnn_benchmark: Optional[bool]
    parallelism: Optional[dict]
    trace_caveats: List[str]
    stack: Optional[dict]
    model_source: str


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


def description_json(fields: DescriptionFields) -> dict:
    d: Dict[str, Any] = {}
    _put(d, "name", fields.name)
    _put(d, "family", fields.family)
    _put(d, "batchSize", int(fields.batch_size))
    _put(d, "inputShape", [int(x) for x in fields.input_shape])
    _put(d, "sequenceLength", int(fields.sequence_length))
    _put(d, "layers", [layer_json(l) for l in fields.layers])
    _put(d, "activationFunction", fields.activation_function)
    _put(d, "optimizer", fields.optimizer)
    _put(d, "dtype", fields.dtype)
    _put(d, "mixedPrecision", bool(fields.mixed_precision))
    _put(d, "framework", "pytorch")
    _put(d, "frameworkVersion", fields.framework_version)
    if fields.trace is not None:
        d["trace"] = fields.trace
    _put(d, "traceUnavailableReason", fields.trace_unavailable_reason)
    if fields.allocator:
        d["allocator"] = fields.allocator
    _put(d, "loss", fields.loss)
    if fields.cudnn_benchmark is not None:  # proto3 optional: false is written, unset is not
        d["cudnnBenchmark"] = bool(fields.cudnn_benchmark)
    if fields.parallelism:
        d["parallelism"] = fields.parallelism
    if fields.trace_caveats:
        d["traceCaveats"] = list(fields.trace_caveats)
    if fields.stack:
        d["stack"] = fields.stack
    _put(d, "modelSource", fields.model_source[:MAX_MODEL_SOURCE])
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
