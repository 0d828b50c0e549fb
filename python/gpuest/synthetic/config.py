"""Parse a GPUMemNet generator config out of a dataset file name or CSV row.

The seed dataset's file names encode the launcher's random draw, e.g.
``input:2346_output:197_depth:2_arch:pyramid_batch:996_act:relu_dropout:0.33_dropout:True_batchnorm:True.out``.
Keys themselves contain underscores (``input_channels``) and so do values
(``act:leaky_relu``), so the name is split only before a *known* key.
"""
from __future__ import annotations

import re
from typing import Any, Mapping, Union

# Every key the three launchers write, longest first so the split regex is greedy.
_KEYS = sorted(
    [
        # MLP
        "input", "output", "depth", "arch", "batch", "act", "dropout", "batchnorm",
        # CNN
        "input_channels", "num_classes", "base_filters", "input_size",
        # Transformer
        "embedding_size", "num_layers", "num_heads", "ff_hidden_size", "dropout_rate",
        "seq_length", "num_samples", "batch_size",
    ],
    key=len,
    reverse=True,
)
_SPLIT = re.compile(r"_(?=(?:%s):)" % "|".join(_KEYS))


def _pairs(name: str):
    name = name.rsplit("/", 1)[-1]
    if name.endswith(".out"):
        name = name[: -len(".out")]
    for part in _SPLIT.split(name):
        key, sep, value = part.partition(":")
        if not sep:
            raise ValueError(f"not a key:value part {part!r} in {name!r}")
        yield key, value


def _bool(v: str) -> bool:
    if v in ("True", "true", "1"):
        return True
    if v in ("False", "false", "0"):
        return False
    raise ValueError(f"not a boolean: {v!r}")


def _from_filename(name: str) -> dict:
    raw: dict = {}
    dropouts = []  # the MLP/CNN names carry "dropout" twice: the rate, then the flag
    for key, value in _pairs(name):
        if key == "dropout":
            dropouts.append(value)
        else:
            raw[key] = value

    if "embedding_size" in raw:
        return {
            "family": "transformer",
            "num_classes": int(raw["num_classes"]),
            "embedding_size": int(raw["embedding_size"]),
            "num_layers": int(raw["num_layers"]),
            "num_heads": int(raw["num_heads"]),
            "ff_hidden_size": int(raw["ff_hidden_size"]),
            "dropout_rate": float(raw["dropout_rate"]),
            "seq_length": int(raw["seq_length"]),
            # The launcher calls the vocabulary size "input_size".
            "vocab_size": int(raw["input_size"]),
            "num_samples": int(raw["num_samples"]) if "num_samples" in raw else None,
            "batch_size": int(raw["batch_size"]),
        }
    if len(dropouts) != 2:
        raise ValueError(f"expected dropout rate and flag in {name!r}")
    common = {
        "depth": int(raw["depth"]),
        "architecture": raw["arch"],
        "batch_size": int(raw["batch"]),
        "activation": raw["act"],
        "dropout_rate": float(dropouts[0]),
        "use_dropout": _bool(dropouts[1]),
        "use_batch_norm": _bool(raw["batchnorm"]),
    }
    if "input_channels" in raw:
        return {
            "family": "cnn",
            "input_channels": int(raw["input_channels"]),
            "num_classes": int(raw["num_classes"]),
            "base_num_filters": int(raw["base_filters"]),
            "input_size": int(raw["input_size"]),
            **common,
        }
    return {
        "family": "mlp",
        "input_size": int(raw["input"]),
        "output_size": int(raw["output"]),
        **common,
    }


def parse_config(filename_or_row: Union[str, Mapping[str, Any]]) -> dict:
    """Generator config of one dataset row, as a plain dict with a ``family`` key.

    Accepts a file name (``...out``) or a CSV row (a mapping with ``Filename`` or
    ``filename``). Transformer rows carry the config in columns too; the file name
    is the source either way, and the columns are checked against it.
    """
    if isinstance(filename_or_row, str):
        return _from_filename(filename_or_row)
    row = filename_or_row
    name = row.get("Filename") or row.get("filename")
    if not name:
        raise ValueError("row has no Filename/filename column")
    cfg = _from_filename(name)
    if cfg["family"] == "transformer":
        for key in ("num_classes", "embedding_size", "num_layers", "num_heads",
                    "ff_hidden_size", "seq_length", "vocab_size", "batch_size"):
            if key in row and row[key] not in ("", None) and int(row[key]) != cfg[key]:
                raise ValueError(f"column {key}={row[key]} disagrees with file name {name!r}")
    return cfg


# The launchers' file-name order per family: (file-name key, config key). MLP and CNN
# names carry "dropout" twice, the rate and then the flag.
_NAME_ORDER = {
    "mlp": (("input", "input_size"), ("output", "output_size"), ("depth", "depth"),
            ("arch", "architecture"), ("batch", "batch_size"), ("act", "activation"),
            ("dropout", "dropout_rate"), ("dropout", "use_dropout"),
            ("batchnorm", "use_batch_norm")),
    "cnn": (("input_channels", "input_channels"), ("num_classes", "num_classes"),
            ("depth", "depth"), ("arch", "architecture"),
            ("base_filters", "base_num_filters"), ("batch", "batch_size"),
            ("input_size", "input_size"), ("act", "activation"),
            ("dropout", "dropout_rate"), ("dropout", "use_dropout"),
            ("batchnorm", "use_batch_norm")),
    "transformer": (("num_classes", "num_classes"), ("embedding_size", "embedding_size"),
                    ("num_layers", "num_layers"), ("num_heads", "num_heads"),
                    ("ff_hidden_size", "ff_hidden_size"), ("dropout_rate", "dropout_rate"),
                    ("seq_length", "seq_length"), ("input_size", "vocab_size"),
                    ("num_samples", "num_samples"), ("batch_size", "batch_size")),
}


def config_keys(family: str) -> tuple:
    """The config keys of a family (what ``parse_config`` returns, less ``family``)."""
    if family not in _NAME_ORDER:
        raise ValueError(f"unknown family {family!r}; one of {', '.join(_NAME_ORDER)}")
    return tuple(dict.fromkeys(key for _, key in _NAME_ORDER[family]))


def config_file_name(cfg: Mapping[str, Any]) -> str:
    """The launcher's file name for a config: the inverse of ``parse_config``, so a new
    run of a seed-style model is named as the seed dataset names its rows."""
    family = cfg["family"]
    parts = []
    for name_key, key in _NAME_ORDER[family]:
        value = cfg[key]
        if value is None:  # a Transformer name without num_samples
            continue
        parts.append(f"{name_key}:{value}")
    return "_".join(parts) + ".out"
