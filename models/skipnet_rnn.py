"""SkipNet with a recurrent (LSTM) gate over a CIFAR ResNet-38.

Original: SkipNet (Wang et al., ECCV 2018), ``ResNetRecurrentGateSP`` — a ResNet-38
(3 groups x 6 basic blocks, 16/32/64 channels); after every block a per-block
projection (average pooling + 1x1 conv) embeds the feature map, and one LSTM gate
shared by all blocks turns the embedding into the probability of running the next
block; at inference ``mask = (prob > 0.5)`` and a skipped block passes its
(downsampled) input on.

Shrunk: widths halved to 8/16/32 channels, embedding and LSTM hidden size 16, and an
``nn.LSTMCell`` instead of a one-step ``nn.LSTM`` (several times cheaper per call);
the 18 blocks are kept. A BatchNorm after each projection standardises the
embeddings. The LSTM state is passed explicitly instead of being stored on the gate
module. The forward returns ``(logits, executed_blocks)`` with the count as a Python
int.

Calibration: BatchNorm statistics are set from 128 calibration images with every block
running; then, three times, the calibration images are run with hard skipping and the
shared gate projection is shifted to the median of all gate logits seen and scaled to
unit spread, so that the gate runs about half of the blocks and its probabilities stay
clear of 0.5.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from models import _common, _skipnet

EMBED_DIM = 16
HIDDEN_DIM = 16
BIAS_ROUNDS = 3


class RNNGatePolicy(nn.Module):
    """An LSTM step on the block embedding, a linear projection and a sigmoid."""

    def __init__(self, embed_dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.rnn = nn.LSTMCell(embed_dim, hidden_dim)
        self.proj = nn.Linear(hidden_dim, 1)

    def forward(self, x: Tensor, h: Tensor, c: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        h, c = self.rnn(x.view(x.size(0), -1), (h, c))
        prob = torch.sigmoid(self.proj(h))
        mask = (prob > 0.5).float()
        return mask, prob, h, c


class SkipNetRNN(_skipnet.GatedResNet):
    """ResNet-38 with per-block gate embeddings ``group{g}_gate{i}`` and a shared LSTM gate."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden_dim = HIDDEN_DIM
        k = 0
        for g in range(3):
            for i in range(self.num_layers[g]):
                if k < len(self.feature_shapes) - 1:  # no gate after the last block
                    channels, size = self.feature_shapes[k]
                    embed = nn.Sequential(
                        nn.AvgPool2d(size),
                        nn.Conv2d(channels, EMBED_DIM, 1),
                        nn.BatchNorm2d(EMBED_DIM),
                    )
                    setattr(self, f"group{g + 1}_gate{i}", embed)
                k += 1
        self.control = RNNGatePolicy(EMBED_DIM, HIDDEN_DIM)

    def forward(self, x: Tensor) -> tuple[Tensor, int]:
        batch_size = x.size(0)
        x = self.relu(self.bn1(self.conv1(x)))
        h = torch.zeros(batch_size, self.hidden_dim)
        c = torch.zeros(batch_size, self.hidden_dim)

        # the first block always runs
        x = self.group1_layer0(x)
        gate_feature = self.group1_gate0(x)
        mask, gprob, h, c = self.control(gate_feature, h, c)
        num_executed = 1
        prev = x
        for g in range(3):
            for i in range(self.num_layers[g]):
                if g == 0 and i == 0:
                    continue
                ds_name = f"group{g + 1}_ds{i}"
                if ds_name in self.ds_layers:
                    prev = self.ds_layers[ds_name](prev)
                if mask.item() == 0:
                    x = prev
                else:
                    x = getattr(self, f"group{g + 1}_layer{i}")(x)
                    num_executed += 1
                prev = x
                if not (g == 2 and i == self.num_layers[g] - 1):
                    gate_feature = getattr(self, f"group{g + 1}_gate{i}")(x)
                    mask, gprob, h, c = self.control(gate_feature, h, c)

        x = self.avgpool(x)
        x = x.view(x.size(0), -1)
        x = self.fc(x)
        return x, num_executed


@torch.no_grad()
def _calibrate(model: SkipNetRNN, batch: Tensor) -> None:
    sites = _skipnet.gate_sites(model.num_layers)
    embeds = [getattr(model, f"group{g + 1}_gate{i}") for g, i in sites]
    state: dict[str, Tensor] = {}
    seen: list[Tensor] = []

    def run_all(k: int, x: Tensor) -> Tensor:
        embeds[k](x)  # so that the embedding's BatchNorm sees statistics too
        return torch.ones(x.shape[0], dtype=torch.bool)

    def gate(k: int, x: Tensor) -> Tensor:
        if k == 0:
            state["h"] = torch.zeros(x.shape[0], HIDDEN_DIM)
            state["c"] = torch.zeros(x.shape[0], HIDDEN_DIM)
        _, prob, state["h"], state["c"] = model.control(embeds[k](x), state["h"], state["c"])
        seen.append(model.control.proj(state["h"]).flatten())
        return prob.flatten() > 0.5

    _common.recalibrate_batchnorm(model, lambda: model.hard_pass(batch, run_all))
    model.eval()
    for _ in range(BIAS_ROUNDS):
        seen.clear()
        model.hard_pass(batch, gate)
        _common.split_gates_(model.control.proj, torch.cat(seen)[:, None])
    _common.standardize_logits_(model.fc, model.hard_pass(batch, gate))


def sample(seed: int) -> Tensor:
    """A seeded 1x3x32x32 image."""
    return _common.sample_image(seed)


class EveryBlock(nn.Module):
    """``SkipNetRNN`` as a static network: every block runs, every gate step is computed."""

    def __init__(self, model: SkipNetRNN) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        model = self.model
        embeds = [getattr(model, f"group{g + 1}_gate{i}") for g, i in _skipnet.gate_sites(model.num_layers)]
        state = [torch.zeros(x.size(0), model.hidden_dim), torch.zeros(x.size(0), model.hidden_dim)]
        masks = []

        def gate(k: int, h: Tensor) -> None:
            mask, _, state[0], state[1] = model.control(embeds[k](h), *state)
            masks.append(mask)

        logits = _skipnet.every_block(model, x, gate)
        return logits, torch.cat(masks, dim=1)


def every_branch(model: SkipNetRNN) -> nn.Module:
    """The static whole network (``benchmarks/batch.py``): the model with every gate open."""
    return EveryBlock(model)


def build() -> tuple[nn.Module, Tensor]:
    """The calibrated model in eval mode and an example input."""
    torch.manual_seed(0)
    model = SkipNetRNN()
    _common.init_weights(model)
    _calibrate(model, _common.calibration_batch(sample))
    return model.eval(), sample(0)


def postprocess(output: tuple[Tensor, int]) -> int:
    """The predicted label."""
    return _skipnet.postprocess(output)
