"""The legacy hook-based ``torch.nn.utils.weight_norm`` (HiFi-GAN, fairseq, WaveNet vocoders) is
refused at the user's line that calls the weight-normed module, with a hint naming the two ways
that compile; both ways, applied to the same HiFi-GAN-like stack, compile and equal eager."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parametrizations, remove_weight_norm, weight_norm

import dycl
from dycl.harness.testing import assert_equivalent
from tests.soundness.fresh_hunt import at, seeded

LRELU_SLOPE = 0.1


class ResBlock(nn.Module):
    """HiFi-GAN's ResBlock1: dilated weight-normed convolutions with leaky-ReLU residuals."""

    def __init__(self, channels: int, norm=weight_norm, dilations=(1, 3)):
        super().__init__()
        self.convs = nn.ModuleList([norm(nn.Conv1d(channels, channels, 3, dilation=d, padding=d))
                                    for d in dilations])

    def forward(self, x):
        for conv in self.convs:
            xt = F.leaky_relu(x, LRELU_SLOPE)
            xt = conv(xt)
            x = xt + x
        return x


class TinyVocoder(nn.Module):
    """A pre-conv, a stack of residual blocks, and a data-dependent clamp of loud frames."""

    def __init__(self, norm=weight_norm):
        super().__init__()
        self.conv_pre = norm(nn.Conv1d(4, 6, 3, padding=1))
        self.resblocks = nn.ModuleList([ResBlock(6, norm) for _ in range(2)])
        self.conv_post = norm(nn.Conv1d(6, 1, 3, padding=1))

    def forward(self, mel):
        x = self.conv_pre(mel)
        for block in self.resblocks:
            x = block(x)
        x = self.conv_post(F.leaky_relu(x))
        if x.abs().max() > 1:
            x = torch.tanh(x)
        return x


def _mels(count: int = 50) -> list[torch.Tensor]:
    g = seeded(1501)
    return [torch.randn(1, 4, 8, generator=g) * (0.05 if i % 2 else 3.0) for i in range(count)]


@pytest.mark.filterwarnings("ignore:.*weight_norm.* is deprecated:FutureWarning")
def test_legacy_weight_norm_is_refused_at_the_calling_line():
    torch.manual_seed(0)
    model = TinyVocoder().eval()
    with pytest.raises(dycl.UnsupportedError, match=at("legacy torch.nn.utils.weight_norm", "self.conv_pre(mel)")) \
            as info:
        dycl.compile(model, _mels()[0])
    assert "parametrizations.weight_norm" in info.value.hint and "remove_weight_norm" in info.value.hint


@pytest.mark.filterwarnings("ignore:.*weight_norm.* is deprecated:FutureWarning")
def test_legacy_weight_norm_inside_a_module_list_names_the_loop_line():
    torch.manual_seed(0)
    block = ResBlock(4).eval()
    with pytest.raises(dycl.UnsupportedError, match=at("submodule 'convs.0'", "for conv in self.convs:")):
        dycl.compile(block, torch.randn(1, 4, 8))


def _removed(model: nn.Module) -> nn.Module:
    for module in model.modules():
        if hasattr(module, "weight_g"):  # the way vocoders' remove_weight_norm() methods find them
            remove_weight_norm(module)
    return model


@pytest.mark.filterwarnings("ignore:.*weight_norm.* is deprecated:FutureWarning")
@pytest.mark.parametrize("build", [lambda: TinyVocoder(parametrizations.weight_norm),
                                   lambda: _removed(TinyVocoder())], ids=["parametrizations", "removed"])
def test_the_hinted_rewrites_compile_and_match_eager(build):
    torch.manual_seed(0)
    model = build().eval()
    inputs = _mels()
    compiled = dycl.compile(model, inputs[0])
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5) == 2  # tanh or not
