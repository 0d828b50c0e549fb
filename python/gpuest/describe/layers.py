"""The layer sequence of a model, recorded with forward hooks during one forward.

A layer is a module that is a leaf or owns parameters directly (MultiheadAttention
owns its input projection; a ViT encoder owns its position embedding). Layers are
listed in the order their forward starts, each with the elements per sample of its
first input and of its output: where an input is not the previous layer's output, an
operation between modules made it (a DenseNet block's torch.cat). Parameters are
counted once per module (a module called twice lists its parameters on its first
call only), and those of
modules that never run as modules (MultiheadAttention uses ``out_proj`` functionally)
are credited to their nearest recorded ancestor, so the layers add up to the model.
"""
from __future__ import annotations

import weakref
from collections import Counter
from typing import Dict, List

import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from . import layer_types

_FUNCTIONAL_ACTIVATIONS = {"relu": "ReLU", "gelu": "GELU", "silu": "SiLU", "tanh": "Tanh"}


def _direct_params(m: nn.Module) -> int:
    return sum(p.numel() for p in m._parameters.values() if p is not None)


def _per_sample(value, batch_size: int) -> int:
    """Elements per sample of the first tensor in ``value`` (a module's inputs or its
    output); 0 when it holds none."""
    for t in tree_flatten(value)[0]:
        if isinstance(t, torch.Tensor):
            return int(t.numel()) // batch_size
    return 0


def _op_name(func) -> str:
    """torch's name of a function a model called, underscores at either end dropped:
    x + y calls Tensor.__add__ ("add"), x += y "iadd", x.add_(y) "add"."""
    return getattr(func, "__name__", "").strip("_")


class _OperationMakers(TorchFunctionMode):
    """Records which function made each storage (the latest to write it), for the
    inputs no module made (Layer.input_op): the layer rule reads a sum apart from a
    product or an attention. Functions a module calls inside its own forward are seen
    too; a module's output is its row's all the same (LayerRecorder._producer first)."""

    def __init__(self, recorder: "LayerRecorder"):
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        first = LayerRecorder._first_tensor(out)
        key = LayerRecorder._storage_key(first) if first is not None else None
        # A view (x.view, permute, transpose, split) makes no storage: its base's maker
        # stays the maker. In-place ops write an input's storage: the latest writer.
        name = getattr(func, "__name__", "")
        in_place = (name.endswith("_") and not name.startswith("__")) or \
            name.startswith("__i")
        if key is not None and not in_place:
            inputs = {LayerRecorder._storage_key(t)
                      for t in tree_flatten((args, kwargs or {}))[0]
                      if isinstance(t, torch.Tensor)}
            if key in inputs:
                return out
        if key is not None:
            self.recorder._maker[key] = (_op_name(func), weakref.ref(first))
        return out


class LayerRecorder:
    """Register with ``attach``; run a forward; ``detach``; then read ``layers()``."""

    def __init__(self, model: nn.Module, batch_size: int):
        self.model = model
        self.batch_size = max(1, int(batch_size))
        self.names: Dict[int, str] = {}
        self.parent: Dict[str, str] = {}
        self.modules: Dict[str, nn.Module] = {}
        for name, m in model.named_modules():
            self.names[id(m)] = name
            self.modules[name] = m
            if name:
                self.parent[name] = name.rsplit(".", 1)[0] if "." in name else ""
        self._recordable = {id(m) for m in model.modules()
                            if not any(True for _ in m.children()) or _direct_params(m)}
        self.entries: List[dict] = []
        # Storage -> (the entry whose output last wrote it, -2 for the model's input;
        # a weak reference to that tensor). Nothing is kept alive: the traced step's
        # frees must stay where they happen. A storage whose tensor is gone may have
        # been freed and its address reused, so it no longer names a producer.
        self._producer: Dict[int, tuple] = {}
        # Storage -> (the function that last wrote it, a weak reference to its tensor).
        self._maker: Dict[int, tuple] = {}
        self._makers: "_OperationMakers | None" = None
        self._open: Dict[int, List[int]] = {}
        self._counted: set = set()
        self._handles = []

    def attach(self):
        self._handles.append(self.model.register_forward_pre_hook(self._model_input))
        for m in self.model.modules():
            if id(m) in self._recordable:
                self._handles.append(m.register_forward_pre_hook(self._pre))
                self._handles.append(m.register_forward_hook(self._post))
        self._makers = _OperationMakers(self)
        self._makers.__enter__()
        return self

    def detach(self):
        for h in self._handles:
            h.remove()
        self._handles.clear()
        if self._makers is not None:
            makers, self._makers = self._makers, None
            makers.__exit__(None, None, None)

    def reset(self):
        self.entries.clear()
        self._open.clear()
        self._counted.clear()
        self._producer.clear()
        self._maker.clear()

    @staticmethod
    def _first_tensor(value):
        for t in tree_flatten(value)[0]:
            if isinstance(t, torch.Tensor):
                return t
        return None

    @staticmethod
    def _storage_key(t):
        """The identity of t's storage (a view shares its base's); None without one."""
        try:
            getter = getattr(t, "untyped_storage", None)
            # torch < 2.0: a TypedStorage over the UntypedStorage.
            storage = getter() if getter is not None else t.storage()._storage
            return storage._cdata
        except Exception:  # noqa: BLE001 - an optional field never fails a describe
            return None

    def _record(self, t, index):
        key = self._storage_key(t) if t is not None else None
        if key is None:
            return
        # A module whose output one of its own children wrote (a norm-and-activation
        # module returning its activation's in-place result) leaves it the child's:
        # the child is the row whose tensor it is.
        current = self._live(key)
        if current is None or current <= index:
            self._producer[key] = (index, weakref.ref(t))

    def _live(self, key):
        """The producer of the storage key while its tensor lives, else None."""
        entry = self._producer.get(key)
        if entry is None or entry[1]() is None:
            return None
        return entry[0]

    def _made_by(self, key) -> str:
        """The function that made the storage while its tensor lives, else ""."""
        entry = self._maker.get(key)
        return "" if entry is None or entry[1]() is None else entry[0]

    def _source(self, key) -> int:
        current = self._live(key)
        return -1 if current is None else current

    def _model_input(self, module, inputs):
        if not self.entries:
            self._record(self._first_tensor(inputs), -2)

    def _pre(self, module, inputs):
        key = id(module)
        params = 0
        if key not in self._counted:  # parameters once per module
            self._counted.add(key)
            params = _direct_params(module)
        self._open.setdefault(key, []).append(len(self.entries))
        first = self._first_tensor(inputs)
        source = self._storage_key(first) if first is not None else None
        input_from = self._source(source) if source is not None else None
        self.entries.append({"type": type(module).__name__, "name": self.names.get(key, ""),
                             "input_activations": _per_sample(inputs, self.batch_size),
                             "input_from": input_from,
                             "input_op": (self._made_by(source) if input_from == -1
                                          else ""),
                             "output_activations": 0, "parameters": params})

    def _post(self, module, inputs, output):
        stack = self._open.get(id(module))
        if not stack:
            return
        index = stack.pop()
        entry = self.entries[index]
        entry["output_activations"] = _per_sample(output, self.batch_size)
        self._record(self._first_tensor(output), index)

    def layers(self) -> List[dict]:
        """Recorded layers, with unexecuted modules' parameters credited upward."""
        first_entry = {}
        for i, e in enumerate(self.entries):
            first_entry.setdefault(e["name"], i)
        for name, m in self.modules.items():
            if id(m) in self._counted:
                continue
            n = _direct_params(m)
            if not n:
                continue
            up = self.parent.get(name)
            while up is not None and up not in first_entry:
                up = self.parent.get(up)
            if up is not None:
                self.entries[first_entry[up]]["parameters"] += n
        return [dict(e) for e in self.entries]


def infer_family(model: nn.Module, layers: List[dict]) -> str:
    """MODEL_FAMILY_* name by the rule the server uses (layer_types.json): from the
    layers' types, with the model's other modules (attention blocks, transformer
    layers) heard for attention and recurrence. Attention outranks a ViT's patch
    convolution; a recurrent network is OTHER."""
    return layer_types.infer_family((l["type"] for l in layers),
                                    (type(m).__name__ for m in model.modules()))


def infer_activation(model: nn.Module, layers: List[dict]) -> str:
    """The most common activation module among the layers (first seen wins a tie);
    for PyTorch transformer layers, which call it as a function, that function."""
    counts = Counter(info.canonical for info in map(layer_types.classify,
                                                    (l["type"] for l in layers))
                     if info.kind == "activation")
    if counts:
        return counts.most_common(1)[0][0]
    for m in model.modules():
        act = getattr(m, "activation", None)
        if isinstance(m, (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)) and act is not None:
            if isinstance(act, nn.Module):
                return type(act).__name__
            name = getattr(act, "__name__", "")
            if name in _FUNCTIONAL_ACTIVATIONS:
                return _FUNCTIONAL_ACTIVATIONS[name]
    return ""
