"""SkipNet with feed-forward gates over a CIFAR ResNet-38.

Original: SkipNet (Wang et al., ECCV 2018), ``ResNetFeedForwardSP`` — a ResNet-38
(3 groups x 6 basic blocks, 16/32/64 channels) with an independent feed-forward gate
(conv-BN-ReLU, pooling, 1x1 conv, sigmoid) after every block that decides whether
the next block runs; at inference ``mask = (prob > 0.5)`` and a skipped block passes
its (downsampled) input on.

Shrunk: widths halved to 8/16/32 channels; the 18 blocks and 17 gates are kept. The
forward returns ``(logits, masks)`` with the 17 gate decisions as a (1, 17) tensor.

Calibration: BatchNorm statistics are set from 128 calibration images with every block
running; then, gate by gate in execution order and with the earlier gates already
skipping blocks, each gate's output layer is shifted and scaled so that its logit is
positive for half of the calibration images and has unit spread (every block runs for
about half of the inputs, and gate probabilities stay clear of 0.5).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from models import _common, _skipnet


class FeedforwardGate(nn.Module):
    """SkipNet's FFGate-I: downsampling conv, BN, ReLU, global pooling, 1x1 conv, sigmoid."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.embed = nn.Sequential(
            nn.Conv2d(channels, channels, 3, 2, 1, bias=False),
            nn.BatchNorm2d(channels),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1),
        )
        self.linear = nn.Conv2d(channels, 1, 1)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        x = self.linear(self.embed(x))
        prob = torch.sigmoid(x.view(x.size(0), -1))
        mask = (prob > 0.5).float()
        return mask, prob


class SkipNetFF(_skipnet.GatedResNet):
    """ResNet-38 with one feed-forward gate per block (``group{g}_gate{i}``)."""

    def __init__(self) -> None:
        super().__init__()
        k = 0
        for g in range(3):
            for i in range(self.num_layers[g]):
                if k < len(self.feature_shapes) - 1:  # no gate after the last block
                    channels = self.feature_shapes[k][0]
                    setattr(self, f"group{g + 1}_gate{i}", FeedforwardGate(channels))
                k += 1

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        x = self.relu(self.bn1(self.conv1(x)))

        # the first block always runs; its gate decides the second block
        x = self.group1_layer0(x)
        mask, gprob = self.group1_gate0(x)
        masks = [mask]
        prev = x
        for g in range(3):
            for i in range(0 + int(g == 0), self.num_layers[g]):
                ds_name = f"group{g + 1}_ds{i}"
                if ds_name in self.ds_layers:
                    prev = self.ds_layers[ds_name](prev)
                if mask.item() == 0:
                    x = prev
                else:
                    x = getattr(self, f"group{g + 1}_layer{i}")(x)
                prev = x
                if not (g == 2 and i == self.num_layers[g] - 1):
                    mask, gprob = getattr(self, f"group{g + 1}_gate{i}")(x)
                    masks.append(mask)

        x = self.avgpool(x)
        x = x.view(x.size(0), -1)
        x = self.fc(x)
        return x, torch.cat(masks, dim=1)


@torch.no_grad()
def _calibrate(model: SkipNetFF, batch: Tensor) -> None:
    sites = _skipnet.gate_sites(model.num_layers)
    gates = [getattr(model, f"group{g + 1}_gate{i}") for g, i in sites]

    def gate(k: int) -> FeedforwardGate:
        return gates[k]

    def run_all(k: int, x: Tensor) -> Tensor:
        gate(k).embed(x)  # so that the gate's BatchNorm sees statistics too
        return torch.ones(x.shape[0], dtype=torch.bool)

    def split_half(k: int, x: Tensor) -> Tensor:
        layer = gate(k).linear
        logits = layer(gate(k).embed(x)).flatten(1)
        return _common.split_gates_(layer, logits).flatten() > 0

    _common.recalibrate_batchnorm(model, lambda: model.hard_pass(batch, run_all))
    model.eval()
    logits = model.hard_pass(batch, split_half)
    _common.standardize_logits_(model.fc, logits)


def sample(seed: int) -> Tensor:
    """A seeded 1x3x32x32 image."""
    return _common.sample_image(seed)


class EveryBlock(nn.Module):
    """``SkipNetFF`` as a static network: every block runs, every gate is computed."""

    def __init__(self, model: SkipNetFF) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        gates = [getattr(self.model, f"group{g + 1}_gate{i}") for g, i in _skipnet.gate_sites(self.model.num_layers)]
        masks = []
        logits = _skipnet.every_block(self.model, x, lambda k, h: masks.append(gates[k](h)[0]))
        return logits, torch.cat(masks, dim=1)


def every_branch(model: SkipNetFF) -> nn.Module:
    """The static whole network (``benchmarks/batch.py``): the model with every gate open."""
    return EveryBlock(model)


def build() -> tuple[nn.Module, Tensor]:
    """The calibrated model in eval mode and an example input."""
    torch.manual_seed(0)
    model = SkipNetFF()
    _common.init_weights(model)
    _calibrate(model, _common.calibration_batch(sample))
    return model.eval(), sample(0)


def postprocess(output: tuple[Tensor, Tensor]) -> int:
    """The predicted label."""
    return _skipnet.postprocess(output)
