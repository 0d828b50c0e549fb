"""The GPUMemNet CNN generator (its NeuroNetGen_scripts/CNN/cnn.py), rebuilt.

Class names and module nesting follow the original on purpose: the dataset's layer
list came from a hook summary that skipped every line naming a ``*Block`` module, so
the blocks must stay modules of those names for the recorder to see the same thing.

The generator draws ``np.random.rand() > 0.5`` twice while building:
- the first draw picks how often a dense network inserts a TransitionBlock
  (every ``ceil(depth / poolings_needed)`` dense blocks, or every 5);
- the second picks the max-pool interval of the other architectures, which only
  matters with ``use_pooling`` (the launcher never set it).
A dataset row does not record the draws; ``rebuild`` tries both.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn

from .activations import make_activation

CNN_ACTIVATIONS = ("relu", "leaky_relu", "prelu", "elu", "selu", "gelu", "tanh", "swish",
                   "softplus", "mish")
ARCHITECTURES = ("pyramid", "reverse_pyramid", "uniform", "bottleneck", "gradual",
                 "hourglass", "residual", "dense")
MAX_FILTERS = 2048  # the generator's cap on channels
TARGET_SIZE = 7     # spatial size the generator pools towards


def _activation(name, device):
    if name not in CNN_ACTIVATIONS:
        raise ValueError(f"unknown CNN activation {name!r}")
    return make_activation(name, device=device)


class ConvBlock(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1, padding=1,
                 use_batch_norm=False, use_dropout=False, dropout_rate=0.5,
                 activation="relu", device=None):
        super().__init__()
        layers = [nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding,
                            device=device)]
        if use_batch_norm:
            layers.append(nn.BatchNorm2d(out_channels, device=device))
        layers.append(_activation(activation, device))
        if use_dropout:
            layers.append(nn.Dropout(dropout_rate))
        self.block = nn.Sequential(*layers)

    def forward(self, x):
        return self.block(x)


class ResidualBlock(nn.Module):
    def __init__(self, in_channels, out_channels, stride=1, use_batch_norm=False,
                 use_dropout=False, dropout_rate=0.5, activation="relu", device=None):
        super().__init__()
        kw = dict(use_batch_norm=use_batch_norm, use_dropout=use_dropout,
                  dropout_rate=dropout_rate, activation=activation, device=device)
        self.conv1 = ConvBlock(in_channels, out_channels, stride=stride, **kw)
        self.conv2 = ConvBlock(out_channels, out_channels, stride=1, **kw)
        if in_channels != out_channels or stride != 1:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=stride,
                          device=device),
                nn.BatchNorm2d(out_channels, device=device) if use_batch_norm
                else nn.Identity(),
            )
        else:
            self.shortcut = nn.Identity()

    def forward(self, x):
        residual = self.shortcut(x)  # runs first: its layers come first in the summary
        x = self.conv1(x)
        x = self.conv2(x)
        return x + residual


class DenseBlock(nn.Module):
    def __init__(self, in_channels, growth_rate, num_layers, use_batch_norm=False,
                 use_dropout=False, dropout_rate=0.5, activation="relu", device=None):
        super().__init__()
        self.layers = nn.ModuleList(
            ConvBlock(in_channels + i * growth_rate, growth_rate,
                      use_batch_norm=use_batch_norm, use_dropout=use_dropout,
                      dropout_rate=dropout_rate, activation=activation, device=device)
            for i in range(num_layers))

    def forward(self, x):
        features = [x]
        for layer in self.layers:
            features.append(layer(torch.cat(features, 1)))
        return torch.cat(features, 1)


class TransitionBlock(nn.Module):
    # The original passes neither activation nor dropout here: always ReLU, no dropout.
    def __init__(self, in_channels, out_channels, use_batch_norm=False, device=None):
        super().__init__()
        self.conv = ConvBlock(in_channels, out_channels, kernel_size=1, stride=1,
                              padding=0, use_batch_norm=use_batch_norm, device=device)
        self.pool = nn.AvgPool2d(2, stride=2)

    def forward(self, x):
        x = self.conv(x)
        if x.size(2) > 1 and x.size(3) > 1:
            x = self.pool(x)
        return x


class GeneratorCrash(ValueError):
    """The original generator raised for this config, so its run trained nothing."""


def _poolings_needed(input_size):
    if input_size[0] // TARGET_SIZE < 1:
        # The original computes log2(0) here and dies with "math domain error" for
        # every architecture; its dataset rows then have an empty layer list and 0 MiB.
        raise GeneratorCrash(f"input_size {input_size[0]} < {TARGET_SIZE}: the original "
                             "generator fails here (math domain error)")
    return max(1, int(math.log2(input_size[0] // TARGET_SIZE)))


class CNN(nn.Module):
    def __init__(self, input_channels=3, num_classes=10, architecture="pyramid",
                 base_num_filters=32, depth=4, growth_rate=32, use_batch_norm=False,
                 use_dropout=False, dropout_rate=0.5, use_pooling=False,
                 activation="relu", input_size=(128, 128),
                 dense_transition_by_depth=True, maxpool_by_depth=True, device=None):
        super().__init__()
        self.blocks = nn.ModuleList()
        in_channels = input_channels
        current_size = input_size
        poolings_needed = _poolings_needed(input_size)  # computed up front, as there
        blk = dict(use_batch_norm=use_batch_norm, use_dropout=use_dropout,
                   dropout_rate=dropout_rate, activation=activation, device=device)

        if architecture == "residual":
            growth_factor = (MAX_FILTERS / base_num_filters) ** (1 / depth)
            for i in range(depth // 2):
                out_channels = min(int(base_num_filters * (growth_factor ** i)), MAX_FILTERS)
                stride = 2 if i % 2 == 1 and current_size[0] > 7 else 1
                self.blocks.append(ResidualBlock(in_channels, out_channels, stride=stride, **blk))
                in_channels = out_channels
                if stride == 2:
                    current_size = (current_size[0] // 2, current_size[1] // 2)
                if current_size[0] <= 7:
                    break

        elif architecture == "dense":
            # First random draw of the generator.
            if dense_transition_by_depth:
                pooling_frequency = max(1, math.ceil(depth / poolings_needed))
            else:
                pooling_frequency = 5
            dense_layers_count = depth // 4
            for i in range(dense_layers_count):
                self.blocks.append(DenseBlock(in_channels, growth_rate, num_layers=4, **blk))
                in_channels += growth_rate * 4
                if i % pooling_frequency == 0 and i != dense_layers_count - 1:
                    self.blocks.append(TransitionBlock(in_channels, in_channels // 2,
                                                       use_batch_norm=use_batch_norm,
                                                       device=device))
                    in_channels = in_channels // 2

        else:
            # Second random draw; only used when use_pooling is set.
            if maxpool_by_depth:
                pooling_interval = max(1, math.ceil(depth / poolings_needed))
            else:
                pooling_interval = 5
            contracting_phase = depth // 2
            expanding_phase = depth - contracting_phase
            for i in range(depth):
                out_channels = _channels(architecture, i, depth, base_num_filters,
                                         contracting_phase, expanding_phase)
                self.blocks.append(ConvBlock(in_channels, out_channels, **blk))
                in_channels = out_channels
                if use_pooling and i % pooling_interval == 0 and i != 0 and current_size[0] > 7:
                    self.blocks.append(nn.MaxPool2d(kernel_size=2, stride=2))
                    current_size = (current_size[0] // 2, current_size[1] // 2)

        self.global_avg_pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(in_channels, num_classes, device=device)
        self.final_activation = nn.Softmax(dim=1) if num_classes > 1 else nn.Sigmoid()

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        x = self.global_avg_pool(x)
        x = torch.flatten(x, 1)
        x = self.fc(x)
        return self.final_activation(x)


def _channels(architecture, i, depth, base, contracting_phase, expanding_phase):
    """Output channels of conv ``i`` for the plain (non-residual, non-dense) topologies."""
    if architecture == "pyramid":
        growth = (MAX_FILTERS / base) ** (1 / depth)
        return min(int(base * (growth ** i)), MAX_FILTERS)
    if architecture == "reverse_pyramid":
        growth = (MAX_FILTERS / base) ** (1 / depth)
        return max(int(base / (growth ** i)), 1)
    if architecture == "bottleneck":
        growth = 2 if depth <= 2 else (MAX_FILTERS / base) ** (1 / (depth - 1))
        return base * 2 if i == 0 else min(int(base * (growth ** (i - 1))), MAX_FILTERS)
    if architecture == "gradual":
        growth = (MAX_FILTERS / base) ** (1 / (2 * depth))
        return min(int(base * (growth ** i)), MAX_FILTERS)
    if architecture == "hourglass":
        if i < contracting_phase:
            growth = (MAX_FILTERS / base) ** (1 / contracting_phase)
            return min(int(base * (growth ** i)), MAX_FILTERS)
        shrink = (MAX_FILTERS / base) ** (1 / expanding_phase)
        return max(int(base * (shrink ** (depth - i - 1))), base)
    if architecture == "uniform":
        return base
    raise ValueError(f"unknown CNN architecture {architecture!r}")


def build_cnn(cfg: dict, dense_transition_by_depth: bool = True,
              maxpool_by_depth: bool = True, use_pooling: bool = False, device=None) -> CNN:
    """CNN for a parsed config. The two booleans are the generator's random draws
    (see the module docstring); ``use_pooling`` stays off as in the launcher."""
    size = cfg["input_size"]
    return CNN(input_channels=cfg["input_channels"], num_classes=cfg["num_classes"],
               architecture=cfg["architecture"], base_num_filters=cfg["base_num_filters"],
               depth=cfg["depth"], use_batch_norm=cfg["use_batch_norm"],
               use_dropout=cfg["use_dropout"], dropout_rate=cfg["dropout_rate"],
               use_pooling=use_pooling, activation=cfg["activation"],
               input_size=(size, size), dense_transition_by_depth=dense_transition_by_depth,
               maxpool_by_depth=maxpool_by_depth, device=device)
