"""Shallow-Deep Network over a MobileNet (v1) backbone.

Original: SDN (Kaya et al., ICML 2019) MobileNet for CIFAR-10 — a 3x3 stem with 32
channels, 13 depthwise-separable blocks widening 64 -> 1024, internal classifiers
(ICs) after several blocks, early exit at the first IC whose softmax confidence
reaches the threshold.

Shrunk: all widths divided by 8 (stem 4 channels, blocks 8 -> 128); the 13 blocks and
their strides are kept. ICs follow blocks 1, 3, 5, 7, 9 and 11, so there are seven
possible exits (six ICs plus the final classifier).

Calibration: the weights are random but kept close to linear, because a random
BatchNorm-ReLU network is otherwise chaotic (``models._sdn.init_weights``): every
BatchNorm bias starts at 1.5, every 3x3 filter is moved halfway towards a blur kernel,
and the filters of every full (pointwise) convolution after the stem cancel over the
input channels. BatchNorm statistics are then set from 128 calibration images; each
classifier's weights are projected onto the 12 leading principal directions of its input
features on 512 further calibration images (and made orthogonal to their mean); every
classifier is rescaled so each class logit has zero mean and unit spread over the 128
images (so that predicted labels vary); then the threshold stays at 0.8 and each IC's
logits are scaled by a temperature baked into its linear layer, chosen so that each exit
takes about 1/7 of the calibration images (``models._common.exit_scales``). Scaling an
input by 1 + 1e-6 moves the returned logits by 1e-5 at most (seeds 0-29; 1e-3 with plain
He-normal weights).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from models import _common, _sdn

CFG: list[int | tuple[int, int]] = [8, (16, 2), 16, (32, 2), 32, (64, 2), 64, 64, 64, 64, 64, (128, 2), 128]
OUTPUT_AFTER = (1, 3, 5, 7, 9, 11)
STEM = 4


class DepthwiseSeparable(nn.Module):
    """Depthwise 3x3 convolution then pointwise 1x1 convolution, each with BN and ReLU."""

    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(in_channels, in_channels, 3, stride, 1, groups=in_channels, bias=False),
            nn.BatchNorm2d(in_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(in_channels, out_channels, 1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.layers(x)


def _model() -> _sdn.SDN:
    init_conv = nn.Sequential(nn.Conv2d(3, STEM, 3, 1, 1, bias=False), nn.BatchNorm2d(STEM), nn.ReLU(inplace=True))
    blocks, shapes = [], []
    channels, size = STEM, 32
    for entry in CFG:
        out_channels, stride = entry if isinstance(entry, tuple) else (entry, 1)
        blocks.append(DepthwiseSeparable(channels, out_channels, stride))
        channels, size = out_channels, size // stride
        shapes.append((channels, size))
    layers = _sdn.make_layers(blocks, shapes, OUTPUT_AFTER)
    return _sdn.SDN(init_conv, layers, _sdn.end_classifier(channels))


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
