"""BlockDrop over a CIFAR ResNet-110.

Original: BlockDrop (Wu et al., "BlockDrop: Dynamic Inference Paths in Residual
Networks", CVPR 2018) for CIFAR-10 — a small policy network (a ResNet-8/10 "agent")
looks at the image once and outputs one Bernoulli probability per residual block of a
ResNet-110 (3 segments x 18 basic blocks, 16/32/64 channels); at inference the policy
is ``probs > 0.5``, and the ``FlatResNet`` backbone runs a block only when its policy
bit is set, otherwise it passes the (downsampled) residual on.

Shrunk: backbone widths halved to 8/16/32 channels (all 54 blocks kept); the agent is a
stride-2 stem, two basic blocks of 8 channels, a stride-2 block of 16 channels and a
linear layer. Downsampling shortcuts are 1x1 convolutions with BN.

Calibration: BatchNorm statistics are set from 128 calibration images (backbone with
every block running), then each policy logit is shifted to its median over the
calibration images and scaled to unit spread, so that every block runs for about half
of the inputs and the policy probabilities stay clear of 0.5.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from models import _common

LAYER_CONFIG = [18, 18, 18]
WIDTHS = (8, 16, 32)
AGENT_WIDTHS = (8, 16)
NUM_CLASSES = 10


class BasicBlock(nn.Module):
    """conv-BN-ReLU-conv-BN; the residual sum and final ReLU happen in the caller."""

    def __init__(self, inplanes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        return self.bn2(self.conv2(out))


def downsample(inplanes: int, planes: int, stride: int) -> nn.Module:
    """Shortcut for a segment's first block: identity, or 1x1 conv + BN when the shape changes."""
    if stride == 1 and inplanes == planes:
        return nn.Sequential()
    return nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))


class FlatResNet(nn.Module):
    """ResNet-110 whose blocks are run or dropped according to a policy vector."""

    def __init__(self) -> None:
        super().__init__()
        self.layer_config = list(LAYER_CONFIG)
        self.seed = nn.Sequential(nn.Conv2d(3, WIDTHS[0], 3, 1, 1, bias=False), nn.BatchNorm2d(WIDTHS[0]), nn.ReLU())
        self.blocks = nn.ModuleList()
        self.ds = nn.ModuleList()
        inplanes = WIDTHS[0]
        for segment, (planes, num_blocks) in enumerate(zip(WIDTHS, LAYER_CONFIG, strict=True)):
            stride = 1 if segment == 0 else 2
            self.ds.append(downsample(inplanes, planes, stride))
            blocks = [BasicBlock(inplanes, planes, stride)]
            blocks += [BasicBlock(planes, planes) for _ in range(num_blocks - 1)]
            self.blocks.append(nn.ModuleList(blocks))
            inplanes = planes
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(WIDTHS[-1], NUM_CLASSES)

    def forward(self, x: Tensor, policy: Tensor) -> Tensor:
        x = self.seed(x)
        t = 0
        for segment, num_blocks in enumerate(self.layer_config):
            for b in range(num_blocks):
                if b == 0:
                    residual = self.ds[segment](x)
                else:
                    residual = x
                if policy[0, t].item() == 1:
                    x = F.relu(residual + self.blocks[segment][b](x))
                else:
                    x = residual
                t += 1
        x = self.avgpool(x)
        x = x.view(x.size(0), -1)
        return self.fc(x)

    def masked_forward(self, x: Tensor, policy: Tensor) -> Tensor:
        """The same computation for a batch, every block computed and masked by the policy."""
        x = self.seed(x)
        t = 0
        for segment, num_blocks in enumerate(self.layer_config):
            for b in range(num_blocks):
                residual = self.ds[segment](x) if b == 0 else x
                run = policy[:, t].bool()[:, None, None, None]
                x = torch.where(run, F.relu(residual + self.blocks[segment][b](x)), residual)
                t += 1
        return self.fc(torch.flatten(self.avgpool(x), 1))


class PolicyNet(nn.Module):
    """The agent: a tiny ResNet that outputs one logit per backbone block."""

    def __init__(self, num_blocks: int) -> None:
        super().__init__()
        w1, w2 = AGENT_WIDTHS
        self.stem = nn.Sequential(nn.Conv2d(3, w1, 3, 2, 1, bias=False), nn.BatchNorm2d(w1), nn.ReLU())
        self.block1 = BasicBlock(w1, w1)
        self.block2 = BasicBlock(w1, w1)
        self.block3 = BasicBlock(w1, w2, 2)
        self.shortcut3 = downsample(w1, w2, 2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.linear = nn.Linear(w2, num_blocks)

    def forward(self, x: Tensor) -> Tensor:
        x = self.stem(x)
        x = F.relu(x + self.block1(x))
        x = F.relu(x + self.block2(x))
        x = F.relu(self.shortcut3(x) + self.block3(x))
        return self.linear(torch.flatten(self.avgpool(x), 1))


class BlockDrop(nn.Module):
    """Policy network + FlatResNet: decide every block up front, then run the chosen ones."""

    def __init__(self) -> None:
        super().__init__()
        self.rnet = FlatResNet()
        self.agent = PolicyNet(sum(self.rnet.layer_config))

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        probs = torch.sigmoid(self.agent(x))
        policy = (probs > 0.5).float()
        preds = self.rnet(x, policy)
        return preds, policy


@torch.no_grad()
def _calibrate(model: BlockDrop, batch: Tensor) -> None:
    everything = torch.ones(batch.shape[0], sum(model.rnet.layer_config))
    _common.recalibrate_batchnorm(model, lambda: (model.agent(batch), model.rnet.masked_forward(batch, everything)))
    model.eval()
    logits = _common.split_gates_(model.agent.linear, model.agent(batch))
    policy = (logits > 0).float()
    _common.standardize_logits_(model.rnet.fc, model.rnet.masked_forward(batch, policy))


def sample(seed: int) -> Tensor:
    """A seeded 1x3x32x32 image."""
    return _common.sample_image(seed)


class EveryBlock(nn.Module):
    """``BlockDrop`` as a static network: the policy is computed, and every block runs."""

    def __init__(self, model: BlockDrop) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        policy = (torch.sigmoid(self.model.agent(x)) > 0.5).float()
        rnet = self.model.rnet
        h = rnet.seed(x)
        for segment, num_blocks in enumerate(rnet.layer_config):
            for b in range(num_blocks):
                residual = rnet.ds[segment](h) if b == 0 else h
                h = F.relu(residual + rnet.blocks[segment][b](h))
        return rnet.fc(torch.flatten(rnet.avgpool(h), 1)), policy


def every_branch(model: BlockDrop) -> nn.Module:
    """The static whole network (``benchmarks/batch.py``): the policy computed, no block dropped."""
    return EveryBlock(model)


def build() -> tuple[nn.Module, Tensor]:
    """The calibrated model in eval mode and an example input."""
    torch.manual_seed(0)
    model = BlockDrop()
    _common.init_weights(model)
    _calibrate(model, _common.calibration_batch(sample))
    return model.eval(), sample(0)


def postprocess(output: tuple[Tensor, Tensor]) -> int:
    """The predicted label."""
    return int(output[0].argmax(dim=-1).item())
