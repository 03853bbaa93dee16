"""Shallow-Deep Network over a VGG-19 backbone.

Original: SDN (Kaya et al., ICML 2019) VGG for CIFAR-10 — conv layers of 64, 64, M,
128, 128, M, 256 x4, M, 512 x4, M, 512 x4, M (VGG-19 configuration, BN after every
convolution), then fully connected layers, with internal classifiers (ICs) after
several convolutions and confidence-based early exit.

Shrunk: convolution widths divided by 8 (8 -> 64), fully connected layers 64 wide
instead of 512/4096. All 16 convolutions and 5 max-pools are kept. ICs follow
convolutions 1, 3, 5, 7, 9 and 11, so there are seven possible exits.

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
moves the returned logits by 2e-5 at most (seeds 0-29; 2e-4 with plain He-normal
weights).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from models import _common, _sdn

CFG: list[int | str] = [8, 8, "M", 16, 16, "M", 32, 32, 32, 32, "M", 64, 64, 64, 64, "M", 64, 64, 64, 64, "M"]
OUTPUT_AFTER = (1, 3, 5, 7, 9, 11)
FC_WIDTH = 64


class ConvBlock(nn.Module):
    """3x3 convolution, BN, ReLU and, at the end of a VGG stage, 2x2 max-pooling."""

    def __init__(self, in_channels: int, out_channels: int, pool: bool) -> None:
        super().__init__()
        layers: list[nn.Module] = [
            nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
        ]
        if pool:
            layers.append(nn.MaxPool2d(2))
        self.layers = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        return self.layers(x)


def _model() -> _sdn.SDN:
    blocks, shapes = [], []
    channels, size = 3, 32
    for i, entry in enumerate(CFG):
        if entry == "M":
            continue
        pool = i + 1 < len(CFG) and CFG[i + 1] == "M"
        blocks.append(ConvBlock(channels, int(entry), pool))
        channels, size = int(entry), size // 2 if pool else size
        shapes.append((channels, size))
    # The first convolution is the SDN "init_conv"; the remaining 15 are SDN layers.
    init_conv, blocks, shapes = blocks[0], blocks[1:], shapes[1:]
    layers = _sdn.make_layers(blocks, shapes, [i - 1 for i in OUTPUT_AFTER])
    end_layers = nn.Sequential(
        nn.Flatten(),
        nn.Linear(channels * size * size, FC_WIDTH),
        nn.ReLU(inplace=True),
        nn.Dropout(0.5),
        nn.Linear(FC_WIDTH, FC_WIDTH),
        nn.ReLU(inplace=True),
        nn.Dropout(0.5),
        nn.Linear(FC_WIDTH, _sdn.NUM_CLASSES),
    )
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
