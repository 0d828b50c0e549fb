"""Writes the project's own small datasets in the measured files' formats.

The measured datasets (GPUMemNet's CSVs, Lucid's pairs) are not in the repository. So
that a clone without them still runs every code path that reads them (the CSV readers,
feature extraction, the trainer, the contention fit), this script makes rows of the same
shape from the project's own generators (gpuest.synthetic rebuilds GPUMemNet's
networks), with a fixed seed. Their memory, utilization and speed columns are NOT
measurements: they come from the simple formulas below, so no test may read accuracy
from them. Regenerate (byte-identical for the same seed and code):

    PYTHONPATH=python /usr/bin/python3 tests/data/fixture-datasets/make_fixtures.py \
        --out tests/data/fixture-datasets
"""
from __future__ import annotations

import argparse
import csv
import math
import os
import random
from collections import Counter

import torch

from gpuest.synthetic.activations import ACTIVATIONS
from gpuest.synthetic import (GeneratorCrash, config_file_name, dataset_layers, input_shape_of,
                              transformer_totals)
from gpuest.synthetic.rebuild import candidates

MIB = 1 << 20
CARD_MIB = 40_960  # the A100 40 GB the measured rows ran on
CONTEXT_MIB = 1_440

MLP_ARCHS = ("pyramid", "uniform", "bottleneck", "gradual")
CNN_ARCHS = ("pyramid", "uniform", "bottleneck", "gradual", "residual", "dense", "hourglass")
MLP_ACTS = ("relu", "gelu", "tanh", "leaky_relu", "elu", "selu", "softplus", "mish", "prelu",
            "swish", "identity")
CNN_ACTS = ("relu", "leaky_relu", "prelu", "elu", "selu", "gelu", "tanh", "swish", "softplus",
            "mish")


def made_memory_mib(params: int, activations: int, batch: int) -> int:
    """A made-up peak: context, weights + gradients + momentum, and the activations
    kept for backward twice over. Shaped like a training step, measured by no one."""
    bytes_ = 4 * (3 * params + 2 * batch * activations)
    return CONTEXT_MIB + math.ceil(bytes_ / MIB)


def made_utilization(work: float) -> dict:
    """Made-up monitor columns rising with the work per step (GPUTL in percent, the
    DCGM ratios in 0..1)."""
    busy = 1.0 - math.exp(-work / 2e7)
    return {"Avg GPUTL": round(15 + 80 * busy, 3), "Avg GRACT": round(0.1 + 0.8 * busy, 4),
            "Avg SMACT": round(0.05 + 0.7 * busy, 4), "Avg SMOCC": round(0.03 + 0.4 * busy, 4),
            "Avg FP32A": round(0.01 + 0.3 * busy, 4)}


def drawn_model(rng: random.Random, cfg):
    """One of the models the generator could have built, its random draws made with rng."""
    models = [model for model, _ in candidates(cfg, device="meta")]
    return models[rng.randrange(len(models))]


def activation_column(cfg, layers) -> str:
    """The study's "Activation Function": the module's class name, "None" for a row whose
    cleaner recorded nothing."""
    return ACTIVATIONS[cfg["activation"]].__name__ if layers else "None"


def layer_text(layers) -> str:
    return "[" + ", ".join(f"({name!r}, {a}, {p})" for name, a, p in layers) + "]"


def mlp_rows(rng: random.Random, n: int):
    header = ["Filename", "Depth", "Activations-Params", "Activation Function",
              "Total Activations", "Total Parameters", "Batch Size",
              "Batch Normalization Layers", "Dropout Layers", "Max GPU Memory (MiB)",
              "Avg GPUTL", "Avg GRACT", "Avg SMACT", "Avg SMOCC", "Avg FP32A"]
    rows = []
    while len(rows) < n:
        cfg = {"family": "mlp", "input_size": rng.randint(16, 3000),
               "output_size": 1 if rng.random() < 0.1 else rng.randint(2, 500),
               "depth": rng.randint(1, 8), "architecture": rng.choice(MLP_ARCHS),
               "batch_size": rng.randint(8, 1024), "activation": rng.choice(MLP_ACTS),
               "dropout_rate": round(rng.uniform(0, 0.5), 6),
               "use_dropout": rng.random() < 0.5, "use_batch_norm": rng.random() < 0.5}
        layers = dataset_layers("mlp", drawn_model(rng, cfg), input_shape_of(cfg))
        acts = sum(a for _, a, _ in layers)
        params = sum(p for _, _, p in layers)
        names = Counter(name for name, _, _ in layers)
        row = {"Filename": config_file_name(cfg), "Depth": len(layers),
               "Activations-Params": layer_text(layers),
               "Activation Function": activation_column(cfg, layers),
               "Total Activations": acts,
               "Total Parameters": params, "Batch Size": cfg["batch_size"],
               "Batch Normalization Layers": names["batch_normalization"],
               "Dropout Layers": names["dropout"],
               "Max GPU Memory (MiB)": made_memory_mib(params, acts, cfg["batch_size"])}
        row.update(made_utilization(cfg["batch_size"] * (acts + params)))
        rows.append(row)
    return header, rows


def cnn_rows(rng: random.Random, n: int):
    header = ["Filename", "Depth", "Activations-Params", "Activation Function",
              "Total Activations", "Total Parameters", "Batch Size", "Max GPU Memory (MiB)",
              "Avg GPUTL", "Avg GRACT", "Avg SMACT", "Avg SMOCC", "Avg FP32A", "Conv2d Count",
              "BatchNorm2d Count", "Dropout Count", "AdaptiveAvgPool2d Count", "Linear Count",
              "Status"]
    counted = {"Conv2d Count": "conv2d", "BatchNorm2d Count": "batchnorm2d",
               "Dropout Count": "dropout", "AdaptiveAvgPool2d Count": "adaptive_avg_pool2d",
               "Linear Count": "linear"}
    rows = []
    while len(rows) < n:
        # As in the seed, a few inputs under 7 px, which the generator cannot build.
        tiny = rng.random() < 0.03
        arch = rng.choice(CNN_ARCHS)
        depth = rng.randint(2, 12)
        if arch == "dense" and rng.random() < 0.5:
            # A block per 4 of depth: only from 28 on do the generator's two draws of its
            # transition interval build different networks.
            depth = rng.randint(28, 40)
        cfg = {"family": "cnn", "input_channels": 3, "num_classes": rng.randint(2, 1000),
               "depth": depth, "architecture": arch,
               "base_num_filters": rng.randint(8, 64), "batch_size": rng.randint(2, 62),
               "input_size": rng.randint(3, 6) if tiny else rng.randint(32, 224),
               "activation": rng.choice(CNN_ACTS),
               "dropout_rate": round(rng.uniform(0, 0.5), 6),
               "use_dropout": rng.random() < 0.5, "use_batch_norm": rng.random() < 0.5}
        try:
            layers = dataset_layers("cnn", drawn_model(rng, cfg), input_shape_of(cfg))
        except GeneratorCrash:
            # The seed's row for such a config: no layers, nothing measured.
            row = {column: 0 for column in header}
            row.update({"Filename": config_file_name(cfg), "Activations-Params": "[]",
                        "Activation Function": "None", "Batch Size": cfg["batch_size"],
                        "Status": "SUCCESSFUL"})
            rows.append(row)
            continue
        acts = sum(a for _, a, _ in layers)
        params = sum(p for _, _, p in layers)
        names = Counter(name for name, _, _ in layers)
        peak = made_memory_mib(params, acts, cfg["batch_size"])
        row = {"Filename": config_file_name(cfg), "Depth": len(layers),
               "Activations-Params": layer_text(layers),
               "Activation Function": activation_column(cfg, layers),
               "Total Activations": acts,
               "Total Parameters": params, "Batch Size": cfg["batch_size"],
               "Max GPU Memory (MiB)": min(peak, CARD_MIB),
               "Status": "SUCCESSFUL" if peak < CARD_MIB else "OOM_CRASH"}
        row.update(made_utilization(cfg["batch_size"] * acts))
        row.update({column: names[name] for column, name in counted.items()})
        rows.append(row)
    return header, rows


def transformer_rows(rng: random.Random, n: int):
    header = ["filename", "num_classes", "embedding_size", "num_layers", "num_heads",
              "ff_hidden_size", "dropout_rate", "seq_length", "vocab_size", "num_samples",
              "batch_size", "depth", "accumulated_params", "total_activations",
              "total_parameters", "max_gpu_memory_mib", "ndq_linear_count", "linear_count",
              "layernorm_count", "dropout_count", "status"]
    rows = []
    while len(rows) < n:
        heads = rng.choice([2, 4, 8])
        cfg = {"family": "transformer", "num_classes": rng.randint(2, 1000),
               "embedding_size": heads * rng.choice([16, 32, 64]),
               "num_layers": rng.randint(1, 6), "num_heads": heads,
               "ff_hidden_size": rng.randint(64, 1024),
               "dropout_rate": round(rng.uniform(0, 0.5), 6),
               "seq_length": rng.choice([64, 128, 256, 512]),
               "vocab_size": rng.randint(1000, 50000), "num_samples": rng.randint(500, 2000),
               "batch_size": rng.choice([8, 16, 32, 64])}
        model = drawn_model(rng, cfg)
        totals = transformer_totals(
            dataset_layers("transformer", model, input_shape_of(cfg), cfg["batch_size"]))
        peak = made_memory_mib(totals["total_parameters"], totals["total_activations"], 1)
        row = {"filename": config_file_name(cfg),
               **{k: cfg[k] for k in ("num_classes", "embedding_size", "num_layers",
                                      "num_heads", "ff_hidden_size", "dropout_rate",
                                      "seq_length", "vocab_size", "num_samples",
                                      "batch_size")},
               "accumulated_params": totals["total_parameters"], **totals,
               "max_gpu_memory_mib": min(peak, CARD_MIB),
               "status": "SUCCESSFUL" if peak < CARD_MIB else "OOM_CRASH"}
        rows.append(row)
    return header, rows


# Jobs for the made-up colocation rows: (model, dataset, batch size, amp, speed alone,
# utilization.gpu %, utilization.memory %). Names of the kind Lucid measured.
JOBS = [("ResNet18", "CIFAR-10", 64, 0, 310.0, 55.0, 25.0),
        ("ResNet50", "ImageNet", 32, 0, 95.0, 92.0, 55.0),
        ("VGG", "ImageNet", 32, 1, 120.0, 88.0, 60.0),
        ("NeuMF", "MovieLens", 1024, 0, 900.0, 30.0, 10.0),
        ("PointNet", "ShapeNet", 32, 0, 210.0, 62.0, 30.0),
        ("PPO", "LunarLander", 64, 0, 400.0, 18.0, 5.0),
        ("BERT", "SQuAD", 16, 1, 70.0, 97.0, 70.0)]


def lucid_rows(rng: random.Random):
    single_header = ["model", "dataset", "batchsize", "amp", "speed", "gpu_util", "gmem_util"]
    single = [dict(zip(single_header, job)) for job in JOBS]
    pair_header = ["model1", "dataset1", "batchsize1", "amp1", "speed1", "model2", "dataset2",
                   "batchsize2", "amp2", "speed2", "gpu_util", "gmem_util"]
    pairs = []
    for i, a in enumerate(JOBS):
        for b in JOBS[i:]:
            # Made up: each job slows by the other's share of a saturated GPU, plus noise.
            total = a[5] + b[5]
            over = max(0.0, total - 100.0) / 100.0

            def speed(u_other):
                return round(max(0.3, min(1.05, 1.0 - over * u_other / 100.0 * 1.2
                                          + rng.gauss(0, 0.03))), 3)

            pairs.append({"model1": a[0], "dataset1": a[1], "batchsize1": a[2], "amp1": a[3],
                          "speed1": speed(b[5]), "model2": b[0], "dataset2": b[1],
                          "batchsize2": b[2], "amp2": b[3], "speed2": speed(a[5]),
                          "gpu_util": round(min(100.0, total * 0.9), 3),
                          "gmem_util": round(min(100.0, (a[6] + b[6]) * 0.9), 3)})
    return (single_header, single), (pair_header, pairs)


def write(path: str, header, rows) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="folder to write gpumemnet/ and lucid/ into")
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--mlp-rows", type=int, default=320)
    p.add_argument("--cnn-rows", type=int, default=320)
    p.add_argument("--transformer-rows", type=int, default=60)
    args = p.parse_args()
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    write(f"{args.out}/gpumemnet/mlp.csv", *mlp_rows(rng, args.mlp_rows))
    write(f"{args.out}/gpumemnet/cnn.csv", *cnn_rows(rng, args.cnn_rows))
    write(f"{args.out}/gpumemnet/transformer_sample.csv",
          *transformer_rows(rng, args.transformer_rows))
    single, pairs = lucid_rows(rng)
    write(f"{args.out}/lucid/single.csv", *single)
    write(f"{args.out}/lucid/colocation.csv", *pairs)


if __name__ == "__main__":
    main()
