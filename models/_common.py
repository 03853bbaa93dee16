"""Helpers shared by the zoo: seeded inputs, weight init and build-time calibration.

Nothing here is called from a model's ``forward``; it only shapes the random weights
so that the seeded input samplers exercise many execution paths.

Note: why calibration is needed. With seeded random weights every exit classifier is
nearly uniform and every gate sits on the same side of 0.5, so a dynamic network takes
one path for every input. Each build therefore runs the model on a fixed calibration
batch (seeds ``CALIBRATION_OFFSET + i``, disjoint from the seeds tests use) and moves
biases / logit scales so that the decisions split the calibration batch.

Note: why some helpers only shape weights. Seeded random BatchNorm networks are far more
sensitive than trained ones: a relative input change of 1e-6 could move an exit's logits
by 1e-3, and float32 rounding does the same, so a compiled model could never agree with
eager PyTorch to 1e-4. ``zero_mean_filters_``, ``smooth_filters_`` and
``project_to_principal_subspace_`` give the random weights some of the structure that
keeps trained networks well-conditioned (see ``models._sdn.init_weights``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

CALIBRATION_OFFSET = 10_000
CALIBRATION_SIZE = 128
IMAGE_SHAPE = (1, 3, 32, 32)


def generator(seed: int) -> torch.Generator:
    """A CPU generator seeded with ``seed`` (independent of the global RNG)."""
    return torch.Generator().manual_seed(seed)


def sample_image(seed: int) -> Tensor:
    """A 1x3x32x32 float32 image: smooth random structure plus pixel noise."""
    g = generator(seed)
    coarse = torch.randn(1, 3, 8, 8, generator=g)
    smooth = F.interpolate(coarse, size=IMAGE_SHAPE[2:], mode="bilinear", align_corners=False)
    return (smooth + 0.5 * torch.randn(*IMAGE_SHAPE, generator=g)).contiguous()


def calibration_batch(sample: Callable[[int], Tensor], size: int = CALIBRATION_SIZE, start: int = 0) -> Tensor:
    """The calibration inputs ``sample(CALIBRATION_OFFSET + start + i)``, ``i < size``,
    concatenated along dim 0."""
    return torch.cat([sample(CALIBRATION_OFFSET + start + i) for i in range(size)], dim=0)


def init_weights(model: nn.Module) -> None:
    """He-normal convolutions (so the signal survives depth), unit BN, small linears."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.modules.batchnorm._BatchNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


@torch.no_grad()
def zero_mean_filters_(conv: nn.Conv2d) -> None:
    """Make every tap of every filter of ``conv`` sum to 0 over the input channels.

    A convolution that reads ReLU outputs sees inputs with a large positive mean that is
    about the same on every channel (BatchNorm standardised them alike). A filter whose
    taps do not cancel over the channels turns that mean into a large input-independent
    offset, and, where a tap falls on the zero padding, into a spatial pattern that grows
    layer after layer; both leave less of each BatchNorm's unit spread to the part that
    differs between inputs, so float32 rounding noise becomes relatively larger. With
    the taps cancelling, a channel-constant input, zero padding included, gives 0."""
    conv.weight.sub_(conv.weight.mean(dim=1, keepdim=True))


BLUR_3X3 = torch.tensor([[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]) / 16


@torch.no_grad()
def smooth_filters_(conv: nn.Conv2d, amount: float) -> None:
    """Move every 3x3 filter of ``conv`` the fraction ``amount`` of the way towards the
    binomial blur kernel with the same sum (so its response to a constant is unchanged).

    Trained filters are spatially smooth; white-noise He filters give feature maps whose
    neighbouring values are almost independent, so every 2x2 max-pooling (or max-pool
    part of an IC) takes the max of four unrelated values, which shrinks the spread
    between inputs by about 30% while passing rounding noise on unchanged."""
    if conv.kernel_size != (3, 3):
        return
    weight = conv.weight
    blurred = weight.sum(dim=(2, 3), keepdim=True) * BLUR_3X3.to(weight.dtype)
    weight.mul_(1 - amount).add_(amount * blurred)


@torch.no_grad()
def recalibrate_batchnorm(model: nn.Module, run: Callable[[], Any]) -> None:
    """Set every BatchNorm's running statistics to the statistics seen during ``run()``.

    ``run`` must push a calibration batch through the network (batched, without
    data-dependent control flow). Afterwards every BN is back in eval mode, so each
    layer's activations are standardised over the input distribution and differ
    between inputs instead of collapsing to a common value.
    """
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    for bn in norms:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative average: exactly the batch statistics
        bn.train()
    run()
    for bn in norms:
        bn.momentum = 0.1
        bn.eval()


def _between(sorted_values: Tensor, k: int) -> float:
    """A value strictly between ``sorted_values[k - 1]`` and ``sorted_values[k]`` (ends padded)."""
    n = sorted_values.numel()
    if k <= 0:
        return float(sorted_values[0]) - 1.0
    if k >= n:
        return float(sorted_values[-1]) + 1.0
    return 0.5 * (float(sorted_values[k - 1]) + float(sorted_values[k]))


@torch.no_grad()
def _min_log_scale(logits: Tensor, threshold: float, steps: int = 80) -> Tensor:
    """Per row, the smallest log-scale ``s`` with ``max softmax(exp(s) * logits) >= threshold``.

    The max-probability of ``c * z`` is non-decreasing in ``c > 0``, so bisection works.
    """
    z = logits.double()
    lo = torch.full((z.shape[0],), -30.0, dtype=torch.float64)
    hi = torch.full((z.shape[0],), 30.0, dtype=torch.float64)
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        conf = torch.softmax(mid.exp()[:, None] * z, dim=1).amax(dim=1)
        ok = conf >= threshold
        hi = torch.where(ok, mid, hi)
        lo = torch.where(ok, lo, mid)
    return hi


@torch.no_grad()
def exit_scales(exit_logits: Sequence[Tensor], threshold: float) -> list[float]:
    """Logit scales for early exits so that the exits share the calibration batch evenly.

    ``exit_logits[k]`` holds the (N, classes) logits of exit ``k`` for the whole batch;
    exit ``k`` is taken when ``max softmax >= threshold`` and no earlier exit was taken.
    A final classifier without a test follows the last listed exit. Scaling the logits
    of exit ``k`` by ``c`` (a temperature) moves its confidences monotonically, so ``c``
    is chosen as a quantile: exit ``k`` takes a ``1 / (K + 1 - k)`` share of the inputs
    still running, which leaves about ``N / (K + 1)`` inputs per exit.
    """
    n = exit_logits[0].shape[0]
    remaining = torch.ones(n, dtype=torch.bool)
    num_exits = len(exit_logits)
    scales = []
    for k, z in enumerate(exit_logits):
        need = _min_log_scale(z, threshold)
        alive = need[remaining].sort().values
        share = round(alive.numel() / (num_exits + 1 - k))
        log_scale = _between(alive, share)
        scales.append(math.exp(log_scale))
        remaining &= need > log_scale
    return scales


@torch.no_grad()
def calibrate_exits_(linears: Sequence[nn.Linear], logits: Sequence[Tensor], threshold: float) -> None:
    """Standardise every exit classifier (``linears[k]`` produced ``logits[k]`` on the
    calibration batch), then scale all but the last so the exits share the batch evenly."""
    logits = [standardize_logits_(linear, z) for linear, z in zip(linears, logits, strict=True)]
    for linear, scale in zip(linears, exit_scales(logits[:-1], threshold), strict=False):
        scale_linear_(linear, scale)


@torch.no_grad()
def project_to_principal_subspace_(linear: nn.Linear, features: Tensor, rank: int) -> None:
    """Restrict ``linear`` to the ``rank`` leading principal directions of its input.

    ``features`` is (N, in_features): the layer's inputs on calibration data. Its weight
    rows are projected onto the top-``rank`` principal directions of the centred features
    and then made orthogonal to the mean feature vector. A random classifier weighs every
    feature direction alike, although the features of a random deep network vary between
    inputs in a few directions only; float32 rounding noise, spread over all directions,
    is then comparable to the signal a random weight vector picks up, and standardising
    the logits amplifies it. A trained classifier reads the directions in which its
    features actually vary, as the projected one does, so its logits are much less noisy.
    """
    x = features.double().flatten(1)
    mean = x.mean(dim=0)
    directions = torch.linalg.svd(x - mean, full_matrices=False).Vh[: min(rank, x.shape[1])]
    weight = linear.weight.double() @ directions.T @ directions
    unit = mean / mean.norm().clamp_min(1e-12)
    weight = weight - (weight @ unit)[:, None] * unit[None, :]
    linear.weight.copy_(weight.to(linear.weight.dtype))


@torch.no_grad()
def scale_linear_(linear: nn.Linear, scale: float) -> None:
    """Multiply a linear layer's output by ``scale`` (weights and bias)."""
    linear.weight.mul_(scale)
    if linear.bias is not None:
        linear.bias.mul_(scale)


@torch.no_grad()
def standardize_logits_(linear: nn.Linear, logits: Tensor) -> Tensor:
    """Rescale a classifier so each class logit has zero mean and unit spread over the
    calibration batch (``logits`` are its current outputs there); returns the new logits.
    Without it one class wins for every input and the predicted labels never differ."""
    mean, std = logits.mean(dim=0), logits.std(dim=0).clamp_min(1e-12)
    linear.weight.div_(std[:, None])
    linear.bias.sub_(mean).div_(std)
    return (logits - mean) / std


@torch.no_grad()
def split_gates_(layer: nn.Linear | nn.Conv2d, logits: Tensor) -> Tensor:
    """Make every gate logit of ``layer`` (its outputs ``logits``, (N, gates), on the
    calibration batch) positive for half of the batch and of unit spread, so gates open
    for about half of the inputs and decisions sit well away from probability 0.5.
    Returns the new logits."""
    centre = torch.tensor([-median_offset(logits[:, j]) for j in range(logits.shape[1])])
    spread = logits.double().std(dim=0).clamp_min(1e-12)
    layer.weight.div_(spread.view(-1, *([1] * (layer.weight.dim() - 1))).to(layer.weight.dtype))
    layer.bias.sub_(centre.to(layer.bias.dtype)).div_(spread.to(layer.bias.dtype))
    return ((logits.double() - centre) / spread).to(logits.dtype)


def median_offset(values: Tensor) -> float:
    """The number to add to ``values`` so that half of them are positive, half negative."""
    return -_between(values.double().flatten().sort().values, values.numel() // 2)


@torch.no_grad()
def fit_rising_logit(states: Tensor, rise: float, ridge: float = 1e-3) -> Tensor:
    """Weights ``[w, b]`` of a logit ``w . state + b`` that grows with the decoding step.

    ``states`` is (N, T, d): decoder states of N calibration sequences over T steps. The
    logit is fitted by ridge regression to ``-rise`` at the first step rising linearly to
    ``+rise`` at the last, the way a trained end-token logit grows as a sentence gets long;
    what the fit misses differs between inputs, so the steps at which sequences stop do.
    """
    n, steps, dim = states.shape
    x = torch.cat([states.double().reshape(n * steps, dim), torch.ones(n * steps, 1, dtype=torch.float64)], dim=1)
    target = torch.linspace(-rise, rise, steps, dtype=torch.float64).repeat(n)
    gram = x.T @ x + ridge * n * steps * torch.eye(dim + 1, dtype=torch.float64)
    return torch.linalg.solve(gram, x.T @ target).float()


@torch.no_grad()
def end_bias(margins: Tensor, num_candidates: int = 512) -> float:
    """The bias added to the end-token logit that spreads greedy-decoding lengths most.

    ``margins[i, t]`` is ``logit_end - max(other logits)`` of calibration sequence ``i``
    at step ``t`` of a decode in which the end token is never chosen. With bias ``b`` the
    sequence stops at the first step where ``margins + b > 0``, and the trajectory before
    that step does not depend on ``b``, so every candidate ``b`` is scored exactly: the
    one whose stop-step distribution has the largest entropy wins.
    """
    running = margins.double().cummax(dim=1).values  # stop by step t  <=>  running[:, t] + b > 0
    n, steps = running.shape
    levels = (-running).flatten().sort().values
    picks = torch.linspace(0, levels.numel(), num_candidates).round().long().unique()
    best_bias, best_entropy = 0.0, -1.0
    for k in picks.tolist():
        b = _between(levels, k)
        stopped = running + b > 0
        stop_step = torch.where(stopped.any(dim=1), stopped.int().argmax(dim=1), torch.full((n,), steps))
        counts = torch.bincount(stop_step, minlength=steps + 1).double()
        p = counts[counts > 0] / n
        entropy = float(-(p * p.log()).sum())
        if entropy > best_entropy + 1e-12:
            best_bias, best_entropy = b, entropy
    return best_bias
