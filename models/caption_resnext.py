"""Image captioning with a ResNeXt encoder and an attention LSTM decoder.

Original: the "ResNext + LSTM" En-Decoder of the DyCL evaluation — Show, Attend and
Tell (Xu et al., ICML 2015) with a ResNeXt (Xie et al., CVPR 2017; aggregated
residual transformations, grouped 3x3 convolutions) image encoder; greedy decoding
stops at the end token, so the caption length depends on the image.

Shrunk: the encoder is a 16-channel stem and three ResNeXt bottleneck blocks
(cardinality 4, widths 32/64/64, each stride 2), giving a 4x4 grid of 64-d features;
the decoder has a 40-word vocabulary, 16-d embeddings, a 32-d LSTM, 16-d attention
and at most 12 words. The LSTM weights are drawn 3x wider than PyTorch's default so
that the random decoder does not settle on one repeated word.

Calibration (``models._caption.calibrate``): BatchNorm statistics are set from 128
calibration images; word scores are standardised over the calibration captions; the
end-token bias is chosen to spread the greedy caption lengths as evenly as possible.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from models import _caption, _common

CARDINALITY = 4
STAGES = ((32, 2), (64, 2), (64, 2))  # (output channels, stride)
STEM = 16


class ResNeXtBottleneck(nn.Module):
    """1x1 reduce, grouped 3x3, 1x1 expand, plus a projection shortcut."""

    def __init__(self, in_channels: int, out_channels: int, stride: int, cardinality: int = CARDINALITY) -> None:
        super().__init__()
        width = out_channels // 2
        self.conv_reduce = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn_reduce = nn.BatchNorm2d(width)
        self.conv_conv = nn.Conv2d(width, width, 3, stride, 1, groups=cardinality, bias=False)
        self.bn = nn.BatchNorm2d(width)
        self.conv_expand = nn.Conv2d(width, out_channels, 1, bias=False)
        self.bn_expand = nn.BatchNorm2d(out_channels)
        self.shortcut = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, 1, stride, bias=False), nn.BatchNorm2d(out_channels)
        )

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn_reduce(self.conv_reduce(x)))
        out = F.relu(self.bn(self.conv_conv(out)))
        out = self.bn_expand(self.conv_expand(out))
        return F.relu(self.shortcut(x) + out)


class ResNeXtEncoder(nn.Module):
    """Stem + ResNeXt stages; returns the (N, C, 4, 4) feature map."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, STEM, 3, 1, 1, bias=False), nn.BatchNorm2d(STEM), nn.ReLU())
        stages = []
        channels = STEM
        for out_channels, stride in STAGES:
            stages.append(ResNeXtBottleneck(channels, out_channels, stride))
            channels = out_channels
        self.stages = nn.Sequential(*stages)
        self.out_channels = channels

    def forward(self, x: Tensor) -> Tensor:
        return self.stages(self.stem(x))


def sample(seed: int) -> Tensor:
    """A seeded 1x3x32x32 image."""
    return _common.sample_image(seed)


def build() -> tuple[nn.Module, Tensor]:
    """The calibrated model in eval mode and an example input."""
    torch.manual_seed(0)
    encoder = ResNeXtEncoder()
    model = _caption.Captioner(encoder, encoder.out_channels)
    _common.init_weights(model)
    _caption.calibrate(model, sample)
    return model.eval(), sample(0)


def postprocess(output: Tensor) -> tuple[int, ...]:
    """The caption as a tuple of token ids."""
    return _caption.postprocess(output)
