"""Image captioning with a GoogLeNet encoder and an attention LSTM decoder.

Original: the "GoogLeNet + LSTM" En-Decoder of the DyCL evaluation — Show, Attend and
Tell (Xu et al., ICML 2015) with a GoogLeNet / Inception-v1 (Szegedy et al., CVPR
2015) image encoder; greedy decoding stops at the end token, so the caption length
depends on the image.

Shrunk: a 16-channel stem and three inception blocks (1x1, 1x1->3x3, 1x1->3x3->3x3
standing in for 5x5, and pool->1x1 branches; 32, 64 and 64 output channels) with
max-pooling in between, giving a 4x4 grid of 64-d features; the decoder has a 40-word
vocabulary, 16-d embeddings, a 32-d LSTM, 16-d attention and at most 12 words. The
LSTM weights are drawn 3x wider than PyTorch's default so that the random decoder
does not settle on one repeated word.

Calibration (``models._caption.calibrate``): BatchNorm statistics are set from 128
calibration images; word scores are standardised over the calibration captions; the
end-token bias is chosen to spread the greedy caption lengths as evenly as possible.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from models import _caption, _common

STEM = 16
# (in, 1x1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool proj)
INCEPTIONS = ((16, 8, 8, 12, 4, 6, 6), (32, 16, 16, 24, 8, 12, 12), (64, 16, 16, 24, 8, 12, 12))


def conv_bn(in_channels: int, out_channels: int, kernel_size: int) -> nn.Sequential:
    """Convolution (same padding) + BN + ReLU."""
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(inplace=True),
    )


class Inception(nn.Module):
    """Four parallel branches concatenated along channels."""

    def __init__(
        self, in_channels: int, ch1x1: int, ch3x3red: int, ch3x3: int, ch5x5red: int, ch5x5: int, pool_proj: int
    ) -> None:
        super().__init__()
        self.branch1 = conv_bn(in_channels, ch1x1, 1)
        self.branch2 = nn.Sequential(conv_bn(in_channels, ch3x3red, 1), conv_bn(ch3x3red, ch3x3, 3))
        self.branch3 = nn.Sequential(
            conv_bn(in_channels, ch5x5red, 1), conv_bn(ch5x5red, ch5x5, 3), conv_bn(ch5x5, ch5x5, 3)
        )
        self.branch4 = nn.Sequential(nn.MaxPool2d(3, 1, 1), conv_bn(in_channels, pool_proj, 1))

    def forward(self, x: Tensor) -> Tensor:
        return torch.cat([self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)], dim=1)


class GoogLeNetEncoder(nn.Module):
    """Stem, then max-pool / inception three times; returns the (N, C, 4, 4) feature map."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = conv_bn(3, STEM, 3)
        self.maxpool1 = nn.MaxPool2d(2)
        self.inception1 = Inception(*INCEPTIONS[0])
        self.maxpool2 = nn.MaxPool2d(2)
        self.inception2 = Inception(*INCEPTIONS[1])
        self.maxpool3 = nn.MaxPool2d(2)
        self.inception3 = Inception(*INCEPTIONS[2])
        self.out_channels = sum(INCEPTIONS[2][i] for i in (1, 3, 5, 6))

    def forward(self, x: Tensor) -> Tensor:
        x = self.maxpool1(self.stem(x))
        x = self.maxpool2(self.inception1(x))
        x = self.maxpool3(self.inception2(x))
        return self.inception3(x)


def sample(seed: int) -> Tensor:
    """A seeded 1x3x32x32 image."""
    return _common.sample_image(seed)


def build() -> tuple[nn.Module, Tensor]:
    """The calibrated model in eval mode and an example input."""
    torch.manual_seed(0)
    encoder = GoogLeNetEncoder()
    model = _caption.Captioner(encoder, encoder.out_channels)
    _common.init_weights(model)
    _caption.calibrate(model, sample)
    return model.eval(), sample(0)


def postprocess(output: Tensor) -> tuple[int, ...]:
    """The caption as a tuple of token ids."""
    return _caption.postprocess(output)
