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
BN_SHIFT = 1.5  # initial BatchNorm bias, in units of the normalised pre-activation's spread
FILTER_SMOOTHING = 0.5  # how far each 3x3 filter moves towards a blur kernel
CLASSIFIER_RANK = 12  # principal feature directions each classifier reads
PROJECTION_SIZE = 512  # calibration images for those directions (after the BN/exit batch)


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
def init_weights(model: SDN) -> None:
    """:func:`models._common.init_weights`, then keep the random backbone close to linear.

    With every BatchNorm bias at 0 each ReLU cuts its (standardised) input at the median,
    and 20-30 such layers in a row make a random network chaotic: a relative input change
    of 1e-6, or float32 rounding, moved the exits' logits by up to 1e-3. So every BN bias
    starts at ``BN_SHIFT`` (about 93% of the units of a BN-ReLU pair are active); every
    3x3 filter is made half smooth (:func:`_common.smooth_filters_`); and every full
    convolution outside the stem gets filters whose taps cancel over the input channels
    (:func:`_common.zero_mean_filters_`), so the ReLU outputs' common positive mean leaves
    no offset or border pattern behind.
    """
    _common.init_weights(model)
    stem = set(model.init_conv.modules())
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            nn.init.constant_(m.bias, BN_SHIFT)
        elif isinstance(m, nn.Conv2d):
            _common.smooth_filters_(m, FILTER_SMOOTHING)
            if m.groups == 1 and m not in stem:
                _common.zero_mean_filters_(m)


def classifiers(model: SDN) -> list[nn.Linear]:
    """The linear layer of every IC, then the last linear layer of the final classifier."""
    linears = [layer.output.linear for layer in model.layers if layer.is_output]
    linears.append([m for m in model.end_layers.modules() if isinstance(m, nn.Linear)][-1])
    return linears


@torch.no_grad()
def calibrate(model: SDN, sample: Callable[[int], Tensor]) -> SDN:
    """Standardise BN statistics, restrict every classifier to the principal directions of
    its features, standardise the classifiers, then scale each IC so that the exits split
    the calibration inputs evenly."""
    batch = _common.calibration_batch(sample)
    _common.recalibrate_batchnorm(model, lambda: model.all_outputs(batch))
    model.eval()
    linears = classifiers(model)
    features: dict[nn.Module, Tensor] = {}
    hooks = [linear.register_forward_pre_hook(lambda m, args: features.__setitem__(m, args[0])) for linear in linears]
    model.all_outputs(_common.calibration_batch(sample, PROJECTION_SIZE, start=_common.CALIBRATION_SIZE))
    for hook in hooks:
        hook.remove()
    for linear in linears:
        _common.project_to_principal_subspace_(linear, features[linear], CLASSIFIER_RANK)
    _common.calibrate_exits_(linears, model.all_outputs(batch), model.confidence_threshold)
    return model


def postprocess(output: Tensor) -> int:
    """The predicted label."""
    return int(output.argmax(dim=-1).item())
