"""What to run: a YAML plan expanded into a deterministic list of jobs with stable ids.

A plan names synthetic families (the GPUMemNet generators of ``gpuest.synthetic``, with
parameter lists or ranges, as the seed's launcher drew them) and real models
(torchvision or timm names), each with batch sizes, optimizers and precisions. The
same plan always expands to the same jobs in the same order, and a job's id depends
only on what it runs, so a restarted collection recognises the rows it already has.
Every error names the YAML key it is about (``synthetic[0].params.depth: ...``).
"""
from __future__ import annotations

import csv
import dataclasses
import itertools
import json
import os
import random
from typing import Any, Dict, List, Mapping, Optional, Tuple

SOURCES = ("synthetic", "torchvision", "timm")
PRECISIONS = ("fp32", "amp")
OPTIMIZERS = ("sgd", "sgd_momentum", "adam", "adamw", "rmsprop", "adagrad")  # describe's
LOSSES = ("auto", "cross_entropy", "mse", "mean")  # describe's

# Settings every job has; each may be given at the top and overridden per entry.
RUN_DEFAULTS = {
    "optimizers": ["adam"],
    "precisions": ["fp32"],
    "loss": "auto",
    "steps": 20,          # measured training steps, after the warm-up
    "warmup_steps": 3,    # not measured: cuDNN autotuning, the optimizer's first step
    "seconds": 0,         # > 0: stop measuring at this many seconds even before `steps`
    "timeout_s": 900,     # the child is killed past this: a row with status TIMEOUT
}
TOP_KEYS = set(RUN_DEFAULTS) | {"synthetic", "models", "pairs", "pair_seconds"}
SYNTHETIC_KEYS = set(RUN_DEFAULTS) | {"family", "params", "samples", "seed"}
MODEL_KEYS = set(RUN_DEFAULTS) | {"source", "names", "batch_sizes", "input_shape",
                                  "input_dtype", "csv"}


class PlanError(ValueError):
    """A plan that cannot run; the message starts with the YAML key at fault."""


@dataclasses.dataclass(frozen=True)
class Job:
    """One training run: a model at one batch size, optimizer and precision."""
    id: str
    source: str                 # synthetic, torchvision, timm
    model: str                  # seed file name (synthetic), or the library's name
    batch_size: int
    optimizer: str
    precision: str              # fp32 or amp
    loss: str
    steps: int
    warmup_steps: int
    seconds: float
    timeout_s: float
    input_shape: Optional[Tuple[int, ...]] = None  # None: the model's default (timm)
    input_dtype: str = "float32"                   # int64 for token ids

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["input_shape"] = list(self.input_shape) if self.input_shape else None
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Job":
        d = dict(d)
        d["input_shape"] = tuple(d["input_shape"]) if d.get("input_shape") else None
        return cls(**d)


@dataclasses.dataclass(frozen=True)
class Pair:
    """Two jobs run at once on one GPU, each one's slowdown measured."""
    id: str
    first: Job
    second: Job
    seconds: float


@dataclasses.dataclass
class Plan:
    jobs: List[Job]
    pairs: List[Pair]


def job_id(source: str, model: str, batch: int, optimizer: str, precision: str) -> str:
    if model.endswith(".out"):
        model = model[:-len(".out")]
    return f"{source}/{model}/b{batch}/{optimizer}/{precision}"


def load_plan(path: str) -> Plan:
    """Reads and expands a YAML plan (or its JSON form, where PyYAML is not installed,
    as on a bare GPU node); PlanError names the file and key at fault."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise PlanError(f"{path}: cannot read: {e}") from None
    try:
        import yaml
    except ImportError:
        try:
            doc = json.loads(text)
        except ValueError:
            raise PlanError(f"{path}: PyYAML is not installed here and the plan is not "
                            f"JSON: convert it where PyYAML is (python3 -m gpuest.collect "
                            f"plan --json PLAN > plan.json)") from None
    else:
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise PlanError(f"{path}: not YAML: {e}") from None
    try:
        return expand(doc)
    except PlanError as e:
        raise PlanError(f"{path}: {e}") from None


def expand(doc: Any) -> Plan:
    """The jobs of a parsed plan, in plan order (``synthetic`` and ``models`` in the
    order the plan gives them, then entry, configuration or model, batch size,
    optimizer, precision)."""
    if not isinstance(doc, Mapping):
        raise PlanError("the plan must be a mapping with `synthetic` and/or `models`")
    _no_unknown_keys(doc, TOP_KEYS, "")
    defaults = _run_settings(doc, RUN_DEFAULTS, "")
    jobs: List[Job] = []
    for section in (k for k in doc if k in ("synthetic", "models")):  # the plan's order
        make = _synthetic_jobs if section == "synthetic" else _model_jobs
        for i, entry in enumerate(_list(doc, section, "")):
            jobs += make(entry, defaults, f"{section}[{i}]")
    if not jobs:
        raise PlanError("the plan has no jobs: give `synthetic` families or `models`")
    seen: Dict[str, Job] = {}
    for j in jobs:
        if j.id in seen:
            raise PlanError(f"job {j.id} appears twice: two entries run the same model, "
                            f"batch size, optimizer and precision")
        seen[j.id] = j
    pair_seconds = _number(doc.get("pair_seconds", 60), "pair_seconds", positive=True)
    pairs = []
    for i, p in enumerate(_list(doc, "pairs", "")):
        key = f"pairs[{i}]"
        if not (isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)):
            raise PlanError(f"{key}: a pair is a list of two job ids")
        for x in p:
            if x not in seen:
                raise PlanError(f"{key}: no job {x!r} in the plan (`plan` lists the ids)")
        pairs.append(Pair(f"pair/{p[0]}+{p[1]}", seen[p[0]], seen[p[1]], pair_seconds))
    return Plan(jobs, pairs)


def self_contained(doc: Mapping[str, Any]) -> dict:
    """The plan with each ``csv`` entry replaced by one entry per model (its names,
    batch sizes and input shape written out): the same jobs, with the same ids, from a
    file that needs nothing beside it (a GPU node without ../shared)."""
    expand(doc)  # valid first: the errors name the original keys
    out = dict(doc)
    if "models" in doc:
        out["models"] = []
        for i, entry in enumerate(doc["models"]):
            if "csv" not in entry:
                out["models"].append(entry)
                continue
            models = _csv_entry_models(entry, f"models[{i}]")
            rest = {k: v for k, v in entry.items() if k not in ("csv", "names")}
            out["models"] += [dict(rest, names=[name], batch_sizes=batches,
                                   input_shape=list(shape))
                              for name, batches, shape in models]
    return out


# --- entries -------------------------------------------------------------------------

def _synthetic_jobs(entry, defaults, key) -> List[Job]:
    from ..synthetic import config_keys
    settings = _entry_settings(entry, SYNTHETIC_KEYS, defaults, key,
                               "a synthetic entry is a mapping with family and params")
    family = entry.get("family")
    if family not in ("mlp", "cnn", "transformer"):
        raise PlanError(f"{key}.family: one of mlp, cnn, transformer, not {family!r}")
    params = entry.get("params")
    if not isinstance(params, Mapping):
        raise PlanError(f"{key}.params: a mapping of the generator's parameters")
    keys = config_keys(family)
    optional = {"num_samples"} if family == "transformer" else set()
    _no_unknown_keys(params, set(keys), f"{key}.params")
    missing = [k for k in keys if k not in params and k not in optional]
    if missing:
        raise PlanError(f"{key}.params: missing {', '.join(missing)} (a {family} model "
                        f"needs {', '.join(keys)})")
    for k, v in params.items():
        _check_values(v, f"{key}.params.{k}", _PARAM_TYPES.get(k, int))
    if "samples" in entry:
        count = _integer(entry["samples"], f"{key}.samples")
        rng = random.Random(_integer(entry.get("seed", 0), f"{key}.seed", minimum=0))
        configs = [{k: _draw(rng, params[k]) for k in keys if k in params}
                   for _ in range(count)]
    else:
        if "seed" in entry:
            raise PlanError(f"{key}.seed: a seed needs `samples` (the grid is not drawn)")
        for k, v in params.items():
            if isinstance(v, Mapping):
                raise PlanError(f"{key}.params.{k}: a min/max range needs `samples` "
                                f"(how many configurations to draw); give a list for a grid")
        names = [k for k in keys if k in params]
        values = [v if isinstance(v, list) else [v] for v in (params[k] for k in names)]
        configs = [dict(zip(names, combo)) for combo in itertools.product(*values)]
    jobs = []
    for n, cfg in enumerate(configs):
        cfg = {"family": family, **cfg}
        if family == "transformer":
            cfg.setdefault("num_samples", None)
        name = _checked_synthetic(cfg, f"{key} configuration {n} ({_short(cfg)})")
        jobs += _jobs_for(settings, "synthetic", name, [int(cfg["batch_size"])], None,
                          "int64" if family == "transformer" else "float32")
    return jobs


def _checked_synthetic(cfg, where) -> str:
    """The seed-style file name of a config the generator can build (built on the meta
    device: no memory), else PlanError."""
    from ..synthetic import GeneratorCrash, candidates, config_file_name, parse_config
    try:
        name = config_file_name(cfg)
        parsed = parse_config(name)
        model, _ = next(candidates(parsed, device="meta"))
        del model
    except (GeneratorCrash, ValueError, KeyError, TypeError) as e:
        raise PlanError(f"{where}: the generator cannot build it: {e}") from None
    return name


def _model_jobs(entry, defaults, key) -> List[Job]:
    settings = _entry_settings(entry, MODEL_KEYS, defaults, key,
                               "a models entry is a mapping with source and names (or csv)")
    source = entry.get("source")
    if source not in ("torchvision", "timm"):
        raise PlanError(f"{key}.source: torchvision or timm, not {source!r}")
    input_dtype = entry.get("input_dtype", "float32")
    if input_dtype not in ("float32", "int64"):
        raise PlanError(f"{key}.input_dtype: float32 or int64, not {input_dtype!r}")
    shape = None
    if "input_shape" in entry:
        shape = entry["input_shape"]
        if not (isinstance(shape, list) and shape
                and all(isinstance(x, int) and not isinstance(x, bool) and x > 0
                        for x in shape)):
            raise PlanError(f"{key}.input_shape: a list of positive integers (per sample, "
                            f"e.g. [3, 224, 224]), not {shape!r}")
        shape = tuple(shape)
    names = entry.get("names")
    if names is not None and not (isinstance(names, list) and names and
                                  all(isinstance(n, str) and n for n in names)):
        raise PlanError(f"{key}.names: a list of {source} model names")
    if "csv" in entry:
        for other in ("batch_sizes", "input_shape"):
            if other in entry:
                raise PlanError(f"{key}.{other}: the csv gives batch sizes and input sizes; "
                                f"give either csv or {other}")
        return [j for name, batches, csv_shape in _csv_entry_models(entry, key)
                for j in _jobs_for(settings, source, name, batches, csv_shape, input_dtype)]
    if names is None:
        raise PlanError(f"{key}.names: a list of {source} model names (or a csv)")
    if source == "torchvision":
        if shape is None:
            raise PlanError(f"{key}.input_shape: torchvision models need one "
                            f"(e.g. [3, 224, 224])")
        import torchvision.models as tvm
        for n in names:
            if not callable(getattr(tvm, n, None)) or n.startswith("_"):
                raise PlanError(f"{key}.names: torchvision.models has no model {n!r}")
    batches = entry.get("batch_sizes")
    if not (isinstance(batches, list) and batches):
        raise PlanError(f"{key}.batch_sizes: a list of positive batch sizes")
    batches = [_integer(b, f"{key}.batch_sizes") for b in batches]
    return [j for n in names
            for j in _jobs_for(settings, source, n, batches, shape, input_dtype)]


def _csv_entry_models(entry, key) -> List[Tuple[str, List[int], Tuple[int, ...]]]:
    """A csv entry's models: the file's, or those ``names`` picks, in that order."""
    models = _csv_models(entry["csv"], f"{key}.csv")
    names = entry.get("names")
    if names is None:
        return models
    known = {m[0]: m for m in models}
    for n in names:
        if n not in known:
            raise PlanError(f"{key}.names: {n!r} is not a model of {entry['csv']}")
    return [known[n] for n in dict.fromkeys(names)]


def _csv_models(path, key) -> List[Tuple[str, List[int], Tuple[int, ...]]]:
    """(model, batch sizes, input shape) per model of a measured CSV in the timm
    dataset's schema (model, input_size CxHxW, batch_size), in file order: a new GPU
    measures the same jobs, so its rows compare with the file's."""
    if not isinstance(path, str):
        raise PlanError(f"{key}: a path to a CSV with model, input_size, batch_size")
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise PlanError(f"{key}: cannot read {path} ({e}; relative paths are from the "
                        f"current directory, {os.getcwd()})") from None
    models: Dict[str, Tuple[List[int], Tuple[int, ...]]] = {}
    for n, row in enumerate(rows, 2):
        try:
            shape = tuple(int(x) for x in row["input_size"].split("x"))
            batch = int(row["batch_size"])
            name = row["model"]
        except (KeyError, ValueError, AttributeError) as e:
            raise PlanError(f"{key}: {path} line {n}: needs model, input_size (CxHxW) and "
                            f"batch_size ({type(e).__name__}: {e})") from None
        batches, _ = models.setdefault(name, ([], shape))
        if batch not in batches:
            batches.append(batch)
    if not models:
        raise PlanError(f"{key}: {path} has no rows")
    return [(m, sorted(b), s) for m, (b, s) in models.items()]


def _jobs_for(settings, source, model, batches, shape, input_dtype) -> List[Job]:
    return [Job(id=job_id(source, model, b, opt, prec), source=source, model=model,
                batch_size=b, optimizer=opt, precision=prec, loss=settings["loss"],
                steps=settings["steps"], warmup_steps=settings["warmup_steps"],
                seconds=settings["seconds"], timeout_s=settings["timeout_s"],
                input_shape=shape, input_dtype=input_dtype)
            for b in batches for opt in settings["optimizers"]
            for prec in settings["precisions"]]


# --- values --------------------------------------------------------------------------

def _entry_settings(entry, allowed, inherited, key, what) -> dict:
    """An entry's run settings: the plan's, with the entry's own overrides."""
    if not isinstance(entry, Mapping):
        raise PlanError(f"{key}: {what}")
    _no_unknown_keys(entry, allowed, key)
    return _run_settings(entry, inherited, key)


def _run_settings(entry, inherited, key) -> dict:
    prefix = f"{key}." if key else ""
    out = dict(inherited)
    if "optimizers" in entry:
        out["optimizers"] = _choices(entry["optimizers"], OPTIMIZERS, prefix + "optimizers")
    if "precisions" in entry:
        out["precisions"] = _choices(entry["precisions"], PRECISIONS, prefix + "precisions")
    if "loss" in entry:
        if entry["loss"] not in LOSSES:
            raise PlanError(f"{prefix}loss: one of {', '.join(LOSSES)}, not {entry['loss']!r}")
        out["loss"] = entry["loss"]
    if "steps" in entry:
        out["steps"] = _integer(entry["steps"], prefix + "steps")
    if "warmup_steps" in entry:
        out["warmup_steps"] = _integer(entry["warmup_steps"], prefix + "warmup_steps",
                                       minimum=0)
    if "seconds" in entry:
        out["seconds"] = _number(entry["seconds"], prefix + "seconds")
    if "timeout_s" in entry:
        out["timeout_s"] = _number(entry["timeout_s"], prefix + "timeout_s", positive=True)
    return out


def _choices(value, allowed, key) -> List[str]:
    if isinstance(value, str):
        value = [value]
    if not (isinstance(value, list) and value):
        raise PlanError(f"{key}: a list of {', '.join(allowed)}")
    for v in value:
        if v not in allowed:
            raise PlanError(f"{key}: {v!r} is not one of {', '.join(allowed)}")
    return list(dict.fromkeys(value))


def _integer(value, key, minimum=1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise PlanError(f"{key}: an integer >= {minimum}, not {value!r}")
    return value


def _number(value, key, positive=False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 \
            or (positive and value == 0):
        raise PlanError(f"{key}: a {'positive' if positive else 'non-negative'} number, "
                        f"not {value!r}")
    return float(value)


# The generator parameters that are not integers (the others all are).
_PARAM_TYPES = {"architecture": str, "activation": str, "dropout_rate": float,
                "use_dropout": bool, "use_batch_norm": bool}


def _is(value, kind) -> bool:
    if kind is bool or isinstance(value, bool):
        return kind is bool and isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float))
    return isinstance(value, kind)


def _check_values(v, key, kind) -> None:
    """A parameter's value: one value, a list to choose from (or to make a grid of), or
    a numeric {min, max} range to draw from."""
    what = {int: "an integer", float: "a number", str: "a name", bool: "true or false"}[kind]
    if isinstance(v, Mapping):
        _no_unknown_keys(v, {"min", "max"}, key)
        lo, hi = v.get("min"), v.get("max")
        if kind not in (int, float) or not (_is(lo, kind) and _is(hi, kind)):
            raise PlanError(f"{key}: a range needs {what} min and max, got {dict(v)!r}")
        if lo > hi:
            raise PlanError(f"{key}: min {lo} is above max {hi}")
        return
    values = v if isinstance(v, list) else [v]
    if not values:
        raise PlanError(f"{key}: an empty list gives no configuration")
    for x in values:
        if not _is(x, kind):
            raise PlanError(f"{key}: {x!r} is not {what}")


def _draw(rng: random.Random, v):
    """One draw of a parameter: a list is chosen from, a range drawn uniformly (integers
    for integer bounds, floats rounded to 4 places otherwise), a scalar kept."""
    if isinstance(v, list):
        return rng.choice(v)
    if isinstance(v, Mapping):
        lo, hi = v["min"], v["max"]
        if isinstance(lo, int) and isinstance(hi, int):
            return rng.randint(lo, hi)
        return round(rng.uniform(lo, hi), 4)
    return v


def _list(doc, name, key) -> list:
    v = doc.get(name, [])
    if not isinstance(v, list):
        raise PlanError(f"{key + '.' if key else ''}{name}: a list")
    return v


def _no_unknown_keys(entry, allowed, key) -> None:
    for k in entry:
        if k not in allowed:
            where = f"{key}.{k}" if key else str(k)
            raise PlanError(f"{where}: unknown key (known: {', '.join(sorted(allowed))})")


def _short(cfg) -> str:
    return ", ".join(f"{k}={v}" for k, v in cfg.items() if k != "family")
