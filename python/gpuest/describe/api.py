"""``describe``: a model in, a ModelDescription out (layers, and a traced step)."""
from __future__ import annotations

import os
import dataclasses
import functools
import inspect
from typing import (TYPE_CHECKING, Any, Callable, Dict, Mapping, Optional, ParamSpec,
                    Sequence)

import torch
import torch.nn as nn

from ._compat import TORCH_VERSION, data_dependent_errors, job_stack
from .layers import infer_activation, infer_family
from .losses import LOSSES, STEP_FUNCTION
from .errors import DescribeError
from .parallelism import parallelism_json
from .message import (DescribeOptions, DescriptionFields, allocator_json, description_json,
                      model_source, to_message, trace_json)
from .optim import ENUM_NAMES as OPTIMIZER_ENUMS
from .optim import IMPLEMENTATIONS as OPTIMIZER_IMPLEMENTATIONS, OPTIMIZERS
from .caveats import unwrap_compiled, weight_caveats
from .session import TraceSession
from .step import DTYPES, InputSpec, fake_forward, real_forward, traced_step

if TYPE_CHECKING:
    from gpuest.v1 import ModelDescription

P = ParamSpec("P")

DTYPE_ENUMS = {"float32": "DTYPE_FLOAT32", "float16": "DTYPE_FLOAT16",
               "bfloat16": "DTYPE_BFLOAT16"}
_INPUT_DTYPES = {"float32": torch.float32, "float16": torch.float16,
                 "bfloat16": torch.bfloat16, "int64": torch.int64, "long": torch.int64,
                 "int32": torch.int32, "bool": torch.bool}


def _input_dtype(value) -> Optional[torch.dtype]:
    if value is None or isinstance(value, torch.dtype):
        return value
    try:
        return _INPUT_DTYPES[str(value)]
    except KeyError:
        raise DescribeError(f"unknown input dtype {value!r}; one of "
                            f"{', '.join(sorted(_INPUT_DTYPES))}") from None


def _specs(input_shape, example_inputs, batch_size, input_dtype):
    """Input specs at the real batch size, the per-sample shape, and the batch size."""
    if example_inputs is not None:
        items = list(example_inputs) if isinstance(example_inputs, (tuple, list)) \
            else [example_inputs]
        tensors = [t for t in items if isinstance(t, torch.Tensor)]
        if not tensors or tensors[0].dim() == 0:
            raise DescribeError("example_inputs needs a tensor with a batch dimension")
        batch = int(batch_size or tensors[0].shape[0])
        specs = [InputSpec((batch, *t.shape[1:]), t.dtype) if isinstance(t, torch.Tensor)
                 else InputSpec(value=t) for t in items]
        return specs, [int(x) for x in tensors[0].shape[1:]], batch
    if input_shape is None:
        raise DescribeError("give input_shape (per sample, e.g. (3, 224, 224)) or "
                            "example_inputs")
    shape = [int(x) for x in input_shape]
    if not shape or any(x <= 0 for x in shape):
        raise DescribeError(f"input_shape must be positive sizes, got {list(input_shape)}")
    if batch_size is None:
        raise DescribeError("batch_size is required with input_shape")
    return [InputSpec((int(batch_size), *shape), input_dtype)], shape, int(batch_size)


# The options describe takes by position too (before keyword-only ones, as it always
# has): the first fields of DescribeOptions, in its order.
_POSITIONAL_OPTIONS = ("input_shape", "example_inputs", "batch_size", "optimizer", "dtype",
                       "amp", "trace")


def _describe_signature() -> inspect.Signature:
    """describe's signature as callers see it: the model, every DescribeOptions field
    as a keyword with the options' default, and ``options``."""
    Parameter = inspect.Parameter
    model = Parameter("model", Parameter.POSITIONAL_OR_KEYWORD, annotation="nn.Module")
    fields = [Parameter(f.name, Parameter.POSITIONAL_OR_KEYWORD
                        if f.name in _POSITIONAL_OPTIONS else Parameter.KEYWORD_ONLY,
                        default=f.default, annotation=f.type)
              for f in dataclasses.fields(DescribeOptions)]
    options = Parameter("options", Parameter.KEYWORD_ONLY, default=None,
                        annotation="Optional[DescribeOptions]")
    return inspect.Signature([model, *fields, options], return_annotation="Dict[str, Any]")


_DESCRIBE_SIGNATURE = _describe_signature()


def _with_arguments(options: Optional[DescribeOptions], model: Any, args: Sequence[Any],
                    kwargs: Mapping[str, Any]) -> DescribeOptions:
    """``options`` (default: DescribeOptions()) with the fields given by position or
    keyword in place of its own."""
    if args and isinstance(args[0], DescribeOptions):
        raise TypeError("describe_json() takes its DescribeOptions by keyword: "
                        "options=DescribeOptions(...)")
    try:
        given = _DESCRIBE_SIGNATURE.bind(model, *args, **kwargs).arguments
    except TypeError as e:  # as Python words it for a plain signature
        raise TypeError(f"describe_json() {e}") from None
    del given["model"]
    return dataclasses.replace(options if options is not None else DescribeOptions(), **given)


def describe_json(model: nn.Module, *args: Any, options: Optional[DescribeOptions] = None,
                  **kwargs: Any) -> Dict[str, Any]:
    """Describe ``model`` for gpuest: its layer sequence and, with ``trace``, the
    allocations of one training step at ``batch_size``, without a GPU and without
    computing anything (fake tensors).

    What to describe comes as keywords (``input_shape``, ``example_inputs``,
    ``batch_size``, ``optimizer``, ``dtype``, ``amp`` and ``trace`` by position too), as
    ``options=gpuest.DescribeOptions(...)`` with the same fields, or both: a keyword
    replaces that field of ``options``. The defaults are DescribeOptions'.

    Inputs: ``input_shape`` is per sample (``(3, 224, 224)``; ``(seq_len,)`` with
    ``input_dtype="int64"`` for token ids); or ``example_inputs``, a tensor or tuple
    whose first dimension is the batch (re-sized to ``batch_size`` when given).
    ``optimizer``: sgd, sgd_momentum, adam, adamw, rmsprop or adagrad. ``dtype``:
    float32, float16 or bfloat16 for the parameters ("true" half precision: the weights,
    gradients and optimizer state in it). ``amp``: mixed precision, torch.autocast on
    CUDA over the ``dtype`` weights: True or "float16" (with a GradScaler, as fp16
    recipes need), "bfloat16" (without one); False for none.
    ``alloc_conf``: the job's PYTORCH_CUDA_ALLOC_CONF (default: this process's
    environment); its max_split_size_mb and expandable_segments go into the
    description for the allocator simulation.

    ``loss``: what the step computes on the output. ``auto`` (the default):
    cross-entropy for a (batch, classes) output, else ``output.mean()``.
    ``cross_entropy``: per token for a (batch, seq, vocab) output, as a language
    model trains (classes on dim 1 otherwise); ``mse``: against a target shaped like
    the output; ``mean``: no target. ``step``: your own ``step(model, batch) ->
    loss`` instead (``batch`` is the input, or the tuple of inputs; your loss code runs
    on the fake tensors, targets included). The description's ``loss`` names the loss
    that was traced. ``cudnn_benchmark``: the job's ``torch.backends.cudnn.benchmark``
    (default: True if this process has turned it on, else not recorded: the server then
    treats a model with convolutions as benchmarking), recorded for the estimate.
    ``parallelism``: how the job spreads over GPUs, e.g. ``{"data_parallel": 8,
    "sharding": "zero3"}`` (keys in ``gpuest.describe.parallelism``); the estimate is
    then per GPU, and the largest block that sharding gathers at once is measured on
    the model. The trace is of the unsharded step at the per-GPU ``batch_size``.

    ``optimizer_impl``: how torch.optim runs the step: "foreach" (torch 2.x's default
    on CUDA: one temporary per parameter alive at once), "fused" (``fused=True``: none)
    or "single_tensor" (``foreach=False``: one at a time).
    ``gradient_accumulation``: micro-batches (each of ``batch_size``) whose gradients
    add up before one optimizer step; above 1 the trace runs two of them, since the
    second's backward runs beside the gradients the first left (and adds into them),
    and later ones repeat it.

    ``describe`` returns a ``gpuest.v1.ModelDescription``; ``describe_json`` the same
    description in its protobuf-JSON form (a dict, 64-bit integers as numbers), built
    without the generated gpuest.v1 modules, for tools that write JSON lines. The model
    is left as it was.
    If the step cannot be traced (an op FakeTensor cannot run, ``.item()`` in the
    forward), the description still has the layers and says why in
    ``traceUnavailableReason``.
    """
    options = _with_arguments(options, model, args, kwargs)
    if not isinstance(model, nn.Module):
        raise DescribeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if options.optimizer_impl not in OPTIMIZER_IMPLEMENTATIONS:
        raise DescribeError(f"unknown optimizer_impl {options.optimizer_impl!r}; one of "
                            f"{', '.join(OPTIMIZER_IMPLEMENTATIONS)}")
    if options.optimizer not in OPTIMIZERS:
        raise DescribeError(f"unknown optimizer {options.optimizer!r}; one of "
                            f"{', '.join(OPTIMIZERS)}")
    if options.dtype not in DTYPES:
        raise DescribeError(f"unknown dtype {options.dtype!r}; one of {', '.join(DTYPES)}")
    if options.loss not in LOSSES:
        raise DescribeError(f"unknown loss {options.loss!r}; one of {', '.join(LOSSES)}")
    if options.step is not None and not callable(options.step):
        raise DescribeError(f"step must be a function step(model, batch) -> loss, got "
                            f"{type(options.step).__name__}")
    if options.step is not None and options.loss != "auto":
        raise DescribeError(f"give either loss={options.loss!r} or a step function, not both")
    cudnn_benchmark = options.cudnn_benchmark
    if cudnn_benchmark is None:
        # True here means the model's code turned it on; False is only PyTorch's
        # default, which the training script may still change: not recorded, so the
        # server treats a model with convolutions as benchmarking, as the common
        # image-training scripts do (the requirement stands; a transient is reported).
        cudnn_benchmark = True if torch.backends.cudnn.benchmark else None
    elif not isinstance(cudnn_benchmark, bool):
        raise DescribeError(f"cudnn_benchmark must be True, False or None, got "
                            f"{cudnn_benchmark!r}")
    amp_dtype = _amp_dtype(options.amp)
    gradient_accumulation = options.gradient_accumulation
    if isinstance(gradient_accumulation, bool) or not isinstance(gradient_accumulation, int) \
            or gradient_accumulation < 1:
        raise DescribeError(f"gradient_accumulation must be a whole number of micro-batches "
                            f"(1 or more), got {gradient_accumulation!r}")
    model, caveats = unwrap_compiled(model)
    if options.batch_size is not None and int(options.batch_size) <= 0:
        raise DescribeError(f"batch_size must be positive, got {options.batch_size}")
    alloc_conf = options.alloc_conf
    if alloc_conf is None:
        alloc_conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    try:
        allocator = allocator_json(alloc_conf)
    except ValueError as e:
        raise DescribeError(str(e)) from None
    in_dtype = _input_dtype(options.input_dtype)
    specs, sample_shape, batch = _specs(options.input_shape, options.example_inputs,
                                        options.batch_size, in_dtype)
    torch_dtype = DTYPES[options.dtype]

    # Everything that reads the model runs in the session: it holds the describe lock,
    # and another call's session may have the same model's parameters swapped for fakes.
    with TraceSession(model, batch, amp_dtype) as session:
        caveats += weight_caveats(model)
        parallel = parallelism_json(options.parallelism, model, getattr(torch, options.dtype))
        reason = ""
        # Without a trace, the loss the caller named (auto resolves only in a step).
        traced_loss = STEP_FUNCTION if options.step is not None else (
            "" if options.loss == "auto" else options.loss)
        trace_msg = None
        layers = None
        if options.trace:
            try:
                traced = traced_step(session, specs, batch, options.optimizer, torch_dtype,
                                     loss=options.loss, step_fn=options.step,
                                     micro_batches=gradient_accumulation,
                                     optimizer_impl=options.optimizer_impl)
                layers = session.recorder.layers()
                traced_loss = traced.loss
                how = (f"torch {TORCH_VERSION} FakeTensorMode, one step: forward, "
                       f"{traced_loss} loss, "
                       f"backward, {options.optimizer} step emulated ({options.optimizer_impl}, "
                       f"first step)"
                       + _amp_words(amp_dtype)
                       + (f", gradient accumulation ({gradient_accumulation} micro-batches: "
                          f"the first two traced)" if gradient_accumulation > 1 else "")
                       + f"; {traced.ops} ops")
                trace_msg = trace_json(traced.sizes, traced.alloc_at, traced.free_at,
                                       traced.category, how, batch)
            except Exception as e:  # any failure of the fake step: say why, keep going
                reason = _reason(e)
        if layers is None:
            layers = _layers_without_trace(session, specs, torch_dtype)
            if isinstance(layers, str):  # no forward ran at all
                reason = (reason + "; " if reason else "") + layers
                layers = []
        family = infer_family(model, layers)
        activation_function = infer_activation(model, layers)

    if options.trace and trace_msg is None and not reason:
        reason = "trace failed for an unknown reason"
    sequence_length = options.sequence_length
    if sequence_length is None:
        tokens = specs[0].dtype is not None and not specs[0].dtype.is_floating_point
        sequence_length = sample_shape[0] if tokens and len(sample_shape) == 1 else 0
    return description_json(DescriptionFields(
        name=options.name or type(model).__name__, family=family, batch_size=batch,
        input_shape=sample_shape, sequence_length=sequence_length, layers=layers,
        activation_function=activation_function,
        optimizer=OPTIMIZER_ENUMS[options.optimizer], dtype=DTYPE_ENUMS[options.dtype],
        mixed_precision=amp_dtype is not None, framework_version=TORCH_VERSION, trace=trace_msg,
        trace_unavailable_reason=reason if options.trace else
        "; ".join(x for x in ("tracing was turned off", reason) if x),
        allocator=allocator, loss=traced_loss, cudnn_benchmark=cudnn_benchmark,
        parallelism=parallel, trace_caveats=caveats if options.trace else [],
        stack=job_stack(), model_source=model_source(model)))


describe_json.__signature__ = _DESCRIBE_SIGNATURE  # type: ignore[attr-defined]


def _returning_message(build: Callable[P, Dict[str, Any]]) -> Callable[P, "ModelDescription"]:
    """``build``'s description as the message, with ``build``'s parameters (one
    signature for both forms)."""
    @functools.wraps(build)
    def describe(*args: P.args, **kwargs: P.kwargs) -> "ModelDescription":
        return to_message(build(*args, **kwargs))
    describe.__name__ = describe.__qualname__ = "describe"
    describe.__signature__ = inspect.signature(build).replace(  # type: ignore[attr-defined]
        return_annotation="ModelDescription")
    return describe


describe = _returning_message(describe_json)


_AMP_DTYPES = {True: torch.float16, "float16": torch.float16, "fp16": torch.float16,
               "bfloat16": torch.bfloat16, "bf16": torch.bfloat16}


def _amp_dtype(amp) -> Optional[torch.dtype]:
    """The autocast type ``amp`` asks for, None for no autocast."""
    if amp is False or amp is None:
        return None
    if isinstance(amp, (bool, str)) and amp in _AMP_DTYPES:
        return _AMP_DTYPES[amp]
    raise DescribeError(f"amp must be False, True, 'float16' or 'bfloat16', got {amp!r}")


def _amp_words(amp_dtype: Optional[torch.dtype]) -> str:
    if amp_dtype is None:
        return ""
    if amp_dtype == torch.float16:
        return ", CUDA autocast (float16) and GradScaler emulated for AMP"
    return ", CUDA autocast (bfloat16, no GradScaler) emulated for AMP"


def _layers_without_trace(session: TraceSession, specs, dtype):
    """Layers from a gradient-free fake forward, else a tiny real one (without the
    emulations: it runs on real values); a string saying why when neither runs."""
    recorder = session.recorder
    errors = []
    for label, run in (("fake forward", lambda: fake_forward(session, specs, dtype)),
                       ("real forward (batch 2)",
                        lambda: real_forward(session.model, specs, 2))):
        recorder.reset()
        recorder.batch_size = 2 if label.startswith("real") else _specs_batch(specs)
        try:
            run()
            return recorder.layers()
        except Exception as e:
            errors.append(f"{label}: {_reason(e)}")
    return "no layer sequence: " + "; ".join(errors)


def _specs_batch(specs):
    for s in specs:
        if s.is_tensor:
            return s.shape[0]
    return 1


def _reason(e: BaseException) -> str:
    kind = ("needs real values (data-dependent op)"
            if isinstance(e, data_dependent_errors()) else type(e).__name__)
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{kind}: {text[:300]}" if text else kind
