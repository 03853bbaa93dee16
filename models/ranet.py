"""RANet: a resolution-adaptive network that looks at small images first.

Original: RANet (Yang et al., "Resolution Adaptive Networks for Efficient
Inference", CVPR 2020) — several dense sub-networks, one per input resolution; the
lowest-resolution sub-network runs first and each of its stages ends in a classifier;
if no classifier is confident, the next sub-network runs on a higher resolution and
fuses the (upsampled) features of the lower-resolution one stage by stage, and so on.
Inference stops at the first classifier whose softmax confidence reaches the threshold.

Shrunk: three sub-networks on 8x8, 16x16 and 32x32 average-pooled copies of the input
(32, 16 and 8 channels), each with two plain conv-BN-ReLU stages instead of dense
blocks; fusion is a 2x nearest upsampling plus a 1x1 convolution added to the stage
output. Six classifiers (conv-BN-ReLU, global pooling, linear) give six exits.

Calibration: BatchNorm statistics are set from 128 calibration images; every
classifier is rescaled so each class logit has zero mean and unit spread over them;
then the threshold stays at 0.8 and each of the first five classifiers' logits are
scaled by a temperature chosen so that each exit takes about 1/6 of the calibration
images (``models._common.exit_scales``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from models import _common

RESOLUTIONS = [8, 16, 32]
CHANNELS = [32, 16, 8]
NUM_STAGES = 2
NUM_CLASSES = 10
CONFIDENCE_THRESHOLD = 0.8


def conv_bn_relu(in_channels: int, out_channels: int, stride: int = 1) -> nn.Sequential:
    """3x3 convolution + BN + ReLU."""
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, 3, stride, 1, bias=False), nn.BatchNorm2d(out_channels), nn.ReLU()
    )


class Fusion(nn.Module):
    """Bring a lower-resolution feature map to the next resolution and width."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 1, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)

    def forward(self, x: Tensor) -> Tensor:
        return self.bn(self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest")))


class Classifier(nn.Module):
    """conv-BN-ReLU (stride 2), global average pooling, linear."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = conv_bn_relu(channels, channels, 2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.linear = nn.Linear(channels, NUM_CLASSES)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear(torch.flatten(self.pool(self.conv(x)), 1))


class RANet(nn.Module):
    """Sub-networks at increasing resolutions with an exit after every stage."""

    def __init__(self) -> None:
        super().__init__()
        self.resolutions = list(RESOLUTIONS)
        self.num_stages = NUM_STAGES
        self.confidence_threshold = CONFIDENCE_THRESHOLD
        self.stems = nn.ModuleList([conv_bn_relu(3, c) for c in CHANNELS])
        self.blocks = nn.ModuleList([nn.ModuleList([conv_bn_relu(c, c) for _ in range(NUM_STAGES)]) for c in CHANNELS])
        self.fusions = nn.ModuleList(
            [nn.ModuleList([Fusion(low, high) for _ in range(NUM_STAGES)]) for low, high in zip(CHANNELS, CHANNELS[1:])]
        )
        self.classifiers = nn.ModuleList([nn.ModuleList([Classifier(c) for _ in range(NUM_STAGES)]) for c in CHANNELS])

    def forward(self, x: Tensor) -> Tensor:
        low_feats = []
        for k, size in enumerate(self.resolutions):
            h = self.stems[k](F.adaptive_avg_pool2d(x, size))
            feats = []
            for j in range(self.num_stages):
                h = self.blocks[k][j](h)
                if k > 0:
                    h = h + self.fusions[k - 1][j](low_feats[j])
                feats.append(h)
                logits = self.classifiers[k][j](h)
                confidence = F.softmax(logits, dim=1).max()
                if confidence.item() >= self.confidence_threshold:
                    return logits
            low_feats = feats
        return logits

    def all_outputs(self, x: Tensor) -> list[Tensor]:
        """Every classifier's logits for a batch, in exit order (no early exit)."""
        outputs = []
        low_feats: list[Tensor] = []
        for k, size in enumerate(self.resolutions):
            h = self.stems[k](F.adaptive_avg_pool2d(x, size))
            feats = []
            for j in range(self.num_stages):
                h = self.blocks[k][j](h)
                if k > 0:
                    h = h + self.fusions[k - 1][j](low_feats[j])
                feats.append(h)
                outputs.append(self.classifiers[k][j](h))
            low_feats = feats
        return outputs


@torch.no_grad()
def _calibrate(model: RANet, batch: Tensor) -> None:
    _common.recalibrate_batchnorm(model, lambda: model.all_outputs(batch))
    model.eval()
    linears = [classifier.linear for per_scale in model.classifiers for classifier in per_scale]
    _common.calibrate_exits_(linears, model.all_outputs(batch), model.confidence_threshold)


def sample(seed: int) -> Tensor:
    """A seeded 1x3x32x32 image."""
    return _common.sample_image(seed)


def build() -> tuple[nn.Module, Tensor]:
    """The calibrated model in eval mode and an example input."""
    torch.manual_seed(0)
    model = RANet()
    _common.init_weights(model)
    _calibrate(model, _common.calibration_batch(sample))
    return model.eval(), sample(0)


def postprocess(output: Tensor) -> int:
    """The predicted label."""
    return int(output.argmax(dim=-1).item())
