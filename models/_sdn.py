"""Shallow-Deep Network (SDN) machinery shared by the four SDN backbones.

Kaya et al., "Shallow-Deep Networks: Understanding and Mitigating Network
Overthinking" (ICML 2019) attach internal classifiers (ICs) to a backbone; at
inference the network stops at the first IC whose softmax confidence reaches
``confidence_threshold``. Each backbone module builds a list of layers, flags the
ones followed by an IC, and hands them to :class:`SDN`, whose ``forward`` is the
authors' early-exit loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from models import _common

NUM_CLASSES = 10
CONFIDENCE_THRESHOLD = 0.8


class MixedPool(nn.Module):
    """SDN's IC pooling: a learned mix of max- and average-pooling."""

    def __init__(self, kernel_size: int) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.alpha = nn.Parameter(torch.rand(1))

    def forward(self, x: Tensor) -> Tensor:
        mix = torch.sigmoid(self.alpha)
        avg = F.avg_pool2d(x, self.kernel_size)
        peak = F.max_pool2d(x, self.kernel_size)
        return mix * peak + (1 - mix) * avg


class InternalClassifier(nn.Module):
    """Pool a (C, H, W) feature map down to at most 4x4, then a linear classifier."""

    def __init__(self, channels: int, size: int, num_classes: int = NUM_CLASSES) -> None:
        super().__init__()
        reduced = min(size, 4)
        self.pool = MixedPool(size // reduced) if size > reduced else nn.Identity()
        self.linear = nn.Linear(channels * reduced * reduced, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear(torch.flatten(self.pool(x), 1))


class SDNLayer(nn.Module):
    """One backbone layer; ``is_output`` says whether an IC follows it."""

    def __init__(self, block: nn.Module, output: InternalClassifier | None = None) -> None:
        super().__init__()
        self.block = block
        self.is_output = output is not None
        if output is not None:
            self.output = output

    def forward(self, x: Tensor) -> Tensor:
        return self.block(x)


class SDN(nn.Module):
    """A backbone with internal classifiers and confidence-based early exit."""

    def __init__(self, init_conv: nn.Module, layers: Sequence[SDNLayer], end_layers: nn.Module) -> None:
        super().__init__()
        self.init_conv = init_conv
        self.layers = nn.ModuleList(layers)
        self.end_layers = end_layers
        self.confidence_threshold = CONFIDENCE_THRESHOLD

    def forward(self, x: Tensor) -> Tensor:
        fwd = self.init_conv(x)
        for layer in self.layers:
            fwd = layer(fwd)
            if layer.is_output:
                output = layer.output(fwd)
                confidence = torch.max(F.softmax(output, dim=1))
                if confidence >= self.confidence_threshold:
                    return output
        output = self.end_layers(fwd)
        return output

    def all_outputs(self, x: Tensor) -> list[Tensor]:
        """Every IC's logits and the final logits, for a batch (no early exit)."""
        outputs = []
        fwd = self.init_conv(x)
        for layer in self.layers:
            fwd = layer(fwd)
            if layer.is_output:
                outputs.append(layer.output(fwd))
        outputs.append(self.end_layers(fwd))
        return outputs


def end_classifier(channels: int, num_classes: int = NUM_CLASSES) -> nn.Sequential:
    """Global average pooling followed by a linear classifier."""
    return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, num_classes))


def make_layers(
    blocks: Sequence[nn.Module], shapes: Sequence[tuple[int, int]], output_after: Sequence[int]
) -> list[SDNLayer]:
    """Wrap ``blocks`` as SDN layers; block ``i`` (output ``shapes[i]`` = (channels, size))
    gets an internal classifier when ``i`` is in ``output_after``."""
    layers = []
    for i, (block, (channels, size)) in enumerate(zip(blocks, shapes, strict=True)):
        ic = InternalClassifier(channels, size) if i in output_after else None
        layers.append(SDNLayer(block, ic))
    return layers


@torch.no_grad()
def calibrate(model: SDN, sample: Callable[[int], Tensor]) -> SDN:
    """Standardise BN statistics and the classifiers, then scale each IC so that the exits
    split the calibration inputs evenly."""
    batch = _common.calibration_batch(sample)
    _common.recalibrate_batchnorm(model, lambda: model.all_outputs(batch))
    model.eval()
    outputs = model.all_outputs(batch)
    linears = [layer.output.linear for layer in model.layers if layer.is_output]
    linears.append([m for m in model.end_layers.modules() if isinstance(m, nn.Linear)][-1])
    _common.calibrate_exits_(linears, outputs, model.confidence_threshold)
    return model


def postprocess(output: Tensor) -> int:
    """The predicted label."""
    return int(output.argmax(dim=-1).item())
