"""Shallow-Deep Network over a WideResNet-32-4 backbone.

Original: SDN (Kaya et al., ICML 2019) WideResNet-32-4 for CIFAR-10 — a 3x3 stem with
16 channels and three stages of five pre-activation wide blocks (64, 128 and 256
channels, dropout between the two convolutions), internal classifiers (ICs) after
several blocks, confidence-based early exit.

Shrunk: widths divided by 8 (8, 16 and 32 channels, i.e. widening factor 4 over a
base of 2/4/8; stem 4 channels); all 15 blocks are kept. ICs follow blocks 1, 3, 5,
8, 10 and 12, so there are seven possible exits.

Calibration: the weights are random but kept close to linear, because a random
BatchNorm-ReLU network is otherwise chaotic (``models._sdn.init_weights``): every
BatchNorm bias starts at 1.5, every 3x3 filter is moved halfway towards a blur kernel,
and the filters of every full convolution after the stem cancel over the input channels.
BatchNorm statistics are then set from 128 calibration images; each classifier's weights
are projected onto the 12 leading principal directions of its input features on 512
further calibration images (and made orthogonal to their mean); every classifier is
rescaled so each class logit has zero mean and unit spread over the 128 images (so that
predicted labels vary); then the threshold stays at 0.8 and each IC's logits are scaled
by a temperature baked into its linear layer, chosen so that each exit takes about 1/7
of the calibration images (``models._common.exit_scales``). Scaling an input by 1 + 1e-6
moves the returned logits by 1e-5 at most (seeds 0-29; 2e-5 with plain He-normal
weights).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from models import _common, _sdn

WIDEN = 4
WIDTHS = (2 * WIDEN, 4 * WIDEN, 8 * WIDEN)
BLOCKS_PER_STAGE = 5
OUTPUT_AFTER = (1, 3, 5, 8, 10, 12)
STEM = 4


class WideBasic(nn.Module):
    """Pre-activation wide block: BN-ReLU-conv, dropout, BN-ReLU-conv, plus shortcut."""

    def __init__(self, in_channels: int, channels: int, stride: int, dropout: float = 0.3) -> None:
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_channels)
        self.conv1 = nn.Conv2d(in_channels, channels, 3, 1, 1)
        self.dropout = nn.Dropout(dropout)
        self.bn2 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, stride, 1)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_channels != channels:
            self.shortcut = nn.Sequential(nn.Conv2d(in_channels, channels, 1, stride))

    def forward(self, x: Tensor) -> Tensor:
        out = self.dropout(self.conv1(F.relu(self.bn1(x))))
        out = self.conv2(F.relu(self.bn2(out)))
        return out + self.shortcut(x)


def _model() -> _sdn.SDN:
    init_conv = nn.Conv2d(3, STEM, 3, 1, 1)
    blocks, shapes = [], []
    channels, size = STEM, 32
    for stage, width in enumerate(WIDTHS):
        for i in range(BLOCKS_PER_STAGE):
            stride = 2 if stage > 0 and i == 0 else 1
            blocks.append(WideBasic(channels, width, stride))
            channels, size = width, size // stride
            shapes.append((channels, size))
    layers = _sdn.make_layers(blocks, shapes, OUTPUT_AFTER)
    end_layers = nn.Sequential(nn.BatchNorm2d(channels), nn.ReLU(), _sdn.end_classifier(channels))
    return _sdn.SDN(init_conv, layers, end_layers)


def sample(seed: int) -> Tensor:
    """A seeded 1x3x32x32 image."""
    return _common.sample_image(seed)


def build() -> tuple[nn.Module, Tensor]:
    """The calibrated model in eval mode and an example input."""
    torch.manual_seed(0)
    model = _model()
    _sdn.init_weights(model)
    _sdn.calibrate(model, sample)
    return model.eval(), sample(0)


def postprocess(output: Tensor) -> int:
    """The predicted label."""
    return _sdn.postprocess(output)
