"""The gated ResNet-38 shared by the two SkipNet variants.

Wang et al., "SkipNet: Learning Dynamic Routing in Convolutional Networks" (ECCV
2018) put a gate in front of every residual block of a CIFAR ResNet; at inference a
block whose gate probability is at most 0.5 is skipped (its input, downsampled when
the block changes shape, is passed on). :class:`GatedResNet` holds the backbone with
the authors' attribute names (``group{g}_layer{i}``, ``group{g}_ds{i}``); the two
variant modules add the gates and the ``forward``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

NUM_LAYERS = (6, 6, 6)
WIDTHS = (8, 16, 32)
NUM_CLASSES = 10


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with a residual connection."""

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x: Tensor) -> Tensor:
        residual = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            residual = self.downsample(x)
        out = out + residual
        return self.relu(out)


class GatedResNet(nn.Module):
    """ResNet-38 backbone (3 groups x 6 basic blocks); subclasses add gates and forward."""

    def __init__(self) -> None:
        super().__init__()
        self.num_layers = list(NUM_LAYERS)
        self.inplanes = WIDTHS[0]
        self.conv1 = nn.Conv2d(3, WIDTHS[0], 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(WIDTHS[0])
        self.relu = nn.ReLU(inplace=True)
        # Downsample shortcuts, also looked up by name when their block is skipped.
        self.ds_layers = nn.ModuleDict()
        self.feature_shapes: list[tuple[int, int]] = []  # (channels, size) after each block
        size = 32
        for g, (planes, blocks) in enumerate(zip(WIDTHS, NUM_LAYERS, strict=True)):
            for i in range(blocks):
                stride = 2 if g > 0 and i == 0 else 1
                downsample = None
                if stride != 1 or self.inplanes != planes:
                    downsample = nn.Sequential(
                        nn.Conv2d(self.inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes)
                    )
                    self.ds_layers[f"group{g + 1}_ds{i}"] = downsample
                block = BasicBlock(self.inplanes, planes, stride, downsample)
                setattr(self, f"group{g + 1}_layer{i}", block)
                self.inplanes = planes
                size //= stride
                self.feature_shapes.append((planes, size))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(WIDTHS[-1], NUM_CLASSES)

    @torch.no_grad()
    def hard_pass(self, batch: Tensor, decide: Callable[[int, Tensor], Tensor]) -> Tensor:
        """Batched inference with hard skipping; ``decide(k, x)`` returns the (N,) bool
        run-mask of gate ``k`` given the previous block's output ``x``. Returns logits."""
        x = self.relu(self.bn1(self.conv1(batch)))
        x = self.group1_layer0(x)
        prev = x
        for k, (g, i) in enumerate(gated_blocks(self.num_layers)):
            name = f"group{g + 1}_ds{i}"
            if name in self.ds_layers:
                prev = self.ds_layers[name](prev)
            run = decide(k, x)
            out = getattr(self, f"group{g + 1}_layer{i}")(x)
            x = torch.where(run[:, None, None, None], out, prev)
            prev = x
        return self.fc(torch.flatten(self.avgpool(x), 1))


def every_block(model: GatedResNet, batch: Tensor, gate: Callable[[int, Tensor], None]) -> Tensor:
    """The backbone with every gate open: each block runs for every sample, and ``gate(k, x)``
    computes gate ``k`` on the output ``x`` of the block it follows (the dynamic model computes
    every gate it reaches, and a static network returns what it returns). Returns logits."""
    x = model.relu(model.bn1(model.conv1(batch)))
    x = model.group1_layer0(x)
    for k, (g, i) in enumerate(gated_blocks(model.num_layers)):
        gate(k, x)
        x = getattr(model, f"group{g + 1}_layer{i}")(x)
    return model.fc(torch.flatten(model.avgpool(x), 1))


def gated_blocks(num_layers: list[int]) -> list[tuple[int, int]]:
    """``(g, i)`` of every gated block in execution order: all blocks but the first, which
    always runs. Gate ``k`` decides ``gated_blocks(...)[k]`` from the previous block's output."""
    blocks = []
    for g in range(3):
        for i in range(num_layers[g]):
            if g == 0 and i == 0:
                continue
            blocks.append((g, i))
    return blocks


def gate_sites(num_layers: list[int]) -> list[tuple[int, int]]:
    """``(g, i)`` of the block after which gate ``k`` sits, for every gate ``k``."""
    return [(0, 0)] + gated_blocks(num_layers)[:-1]


def postprocess(output: tuple[Tensor, object]) -> int:
    """The predicted label (the first element of the output holds the logits)."""
    return int(output[0].argmax(dim=-1).item())
