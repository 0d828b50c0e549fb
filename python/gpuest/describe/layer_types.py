"""The layer-type table shared with the server: proto/gpuest/v1/layer_types.json.

Canonical names, the spellings that mean them, their kinds, what each saves for
backward, and the rule that infers a model's family from its layer types. The server
embeds the same file at build time (estimators/core/layer_types.cc); both sides read it the
same way, so they classify a layer and infer a family alike.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Dict, Iterable, NamedTuple, Optional, Set


def table_path() -> Path:
    """Where the table is: in an installed package, gpuest/v1/layer_types.json (copied
    there from proto/ when the wheel was built); in the repository's checkout, which has
    no gpuest/v1 beside this package, proto/gpuest/v1 itself."""
    here = Path(__file__).resolve()
    shipped = here.parents[1] / "v1" / "layer_types.json"
    if shipped.is_file():
        return shipped
    return here.parents[3] / "proto" / "gpuest" / "v1" / "layer_types.json"


class LayerType(NamedTuple):
    canonical: str  # PyTorch class name, e.g. "BatchNorm1d"
    kind: str       # "linear", "conv", ..., "unknown"
    saves: str      # what autograd keeps for backward: "input", "output", ...


def _squash(name: str) -> str:
    """Lower-cased without '_', ' ' and '-': 'batch_normalization' meets 'BatchNormalization'."""
    return "".join(c for c in name.lower() if c not in "_ -")


class _Table:
    def __init__(self, data: dict):
        self.unknown_saves = data["unknown_saves"]
        # Exact class names first (GPT-2's Conv1D vs torch's Conv1d), then squashed
        # spellings, the first type listed winning.
        self.exact: Dict[str, LayerType] = {}
        self.squashed: Dict[str, LayerType] = {}
        for t in data["types"]:
            info = LayerType(t["name"], t["kind"], t["saves"])
            if info.canonical in self.exact:
                raise ValueError(f"{table_path()}: {info.canonical} is listed twice")
            self.exact[info.canonical] = info
            for spelling in [info.canonical] + t.get("aliases", []):
                self.squashed.setdefault(_squash(spelling), info)
        rule = data["family_rule"]
        self.signals = {name: ({_squash(n) for n in s["types"]},
                               [_squash(p) for p in s["name_contains"]])
                        for name, s in rule["signals"].items()}
        self.clauses = rule["clauses"]


@functools.lru_cache(maxsize=None)
def _table() -> _Table:
    with open(table_path()) as f:
        return _Table(json.load(f))


def classify(type_name: str) -> LayerType:
    """Canonical name, kind and saved tensors of a spelling from any source; unknown
    types keep their spelling and are of kind "unknown"."""
    t = _table()
    found = t.exact.get(type_name) or t.squashed.get(_squash(type_name))
    return found or LayerType(type_name, "unknown", t.unknown_saves)


def _signals(type_name: str) -> Set[str]:
    squashed = _squash(type_name)
    return {name for name, (types, parts) in _table().signals.items()
            if squashed in types or any(p in squashed for p in parts)}


def infer_family(layer_types: Iterable[str],
                 module_types: Optional[Iterable[str]] = None) -> str:
    """MODEL_FAMILY_* name by the table's family rule, from the types of a model's
    layers (as the server does from a description) and, for the named signals only,
    the types of its other modules (attention blocks a description does not list)."""
    layer_types = set(layer_types)
    present = {classify(t).kind for t in layer_types}
    for t in layer_types | set(module_types or ()):
        present |= _signals(t)
    for clause in _table().clauses:
        if clause.get("any_of") and not present & set(clause["any_of"]):
            continue
        if not set(clause.get("all_of", ())) <= present:
            continue
        if "only" in clause and not present <= set(clause["only"]):
            continue
        return clause["family"]
    return "MODEL_FAMILY_OTHER"
