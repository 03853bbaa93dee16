"""Fresh hunt, family 15: weights computed on access or shared, as real packages build them:
``parametrizations.weight_norm`` (HiFi-GAN, wav2vec2), the legacy hook-based ``nn.utils.weight_norm``
(fairseq), ``spectral_norm`` and ``orthogonal`` (GAN discriminators), a user parametrization and
``parametrize.cached()``, a conv and batch norm fused by ``nn.utils.fusion``, and an LM head tied to
the embedding (``lm_head.weight = embed.weight``) with one side changed after compiling. Each agrees,
is refused by name (an operator ONNX lacks, a hook dycl cannot read, an unsupported ``with``), or is
refused on the call after a change (``StaleWeightsError``)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import orthogonal, spectral_norm, weight_norm

import dycl
from dycl.harness.testing import assert_equivalent
from tests.soundness.fresh_hunt import Case, at, check_case, seeded


class GatedOutput(nn.Module):
    """``fc`` (however its weight is made), then a data-dependent activation."""

    def __init__(self, fc: nn.Module):
        super().__init__()
        self.fc = fc

    def forward(self, x):
        y = self.fc(x)
        if y.sum() > 0:
            return y.relu()
        return y * 0.5


class Symmetric(nn.Module):  # the parametrization of the PyTorch tutorial
    def forward(self, weight):
        return weight.triu() + weight.triu(1).transpose(-1, -2)


def _symmetric_linear() -> nn.Linear:
    fc = nn.Linear(4, 4)
    parametrize.register_parametrization(fc, "weight", Symmetric())
    return fc


class CachedTwice(nn.Module):  # the weight computed once for two uses
    def __init__(self):
        super().__init__()
        self.fc = _symmetric_linear()

    def forward(self, x):
        with parametrize.cached():
            y = self.fc(x) + self.fc(x * 2)
        if y.sum() > 0:
            return y
        return -y


class FusedConvBn(nn.Module):
    def __init__(self):
        super().__init__()
        conv, bn = nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4)
        with torch.no_grad():
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.5, 2)
        self.block = torch.nn.utils.fusion.fuse_conv_bn_eval(conv.eval(), bn.eval())

    def forward(self, x):
        y = self.block(x)
        if y.mean() > 0:
            return y.relu()
        return y.sigmoid()


class TiedLm(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.lm_head = nn.Linear(4, 10, bias=False)
        self.lm_head.weight = self.embed.weight

    def forward(self, ids):
        logits = self.lm_head(self.embed(ids).mean(1))
        if logits.max() > 1.0:
            return logits.softmax(-1)
        return logits


def _randn(seed, shape=(2, 4)):
    def make():
        g = seeded(seed)
        return [torch.randn(*shape, generator=g) * 2 + (i % 2 - 0.5) * 2 for i in range(50)]
    return make


def _ids():
    g = seeded(506)
    return [torch.randint(0, 10, (2, 3), generator=g) for _ in range(50)]


CASES = {
    "weight_norm": Case(lambda: GatedOutput(weight_norm(nn.Linear(4, 4))), _randn(501), 2),
    "legacy_weight_norm": Case(lambda: GatedOutput(torch.nn.utils.weight_norm(nn.Linear(4, 4))), _randn(502), 2,
                               refused=at("legacy torch.nn.utils.weight_norm", "y = self.fc(x)")),
    "spectral_norm": Case(lambda: GatedOutput(spectral_norm(nn.Linear(4, 4))), _randn(503), 2,
                          refused=at("operator vdot", "y = self.fc(x)")),
    "orthogonal": Case(lambda: GatedOutput(orthogonal(nn.Linear(4, 4))), _randn(504), 2,
                       refused=at("operator mH", "y = self.fc(x)")),
    "user_parametrization": Case(lambda: GatedOutput(_symmetric_linear()), _randn(505), 2),
    "parametrize_cached": Case(CachedTwice, _randn(507), 2,
                               refused=at("with statement", "with parametrize.cached():")),
    "fused_conv_bn": Case(FusedConvBn, _randn(508, (1, 3, 5, 5)), 2),
    "tied_lm_head": Case(TiedLm, _ids, 2),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.filterwarnings("ignore:.*weight_norm.* is deprecated:FutureWarning")
def test_parametrized_weights(name, tmp_path):
    case = CASES[name]
    assert check_case(case, tmp_path) == case.paths


def _scale_embedding(model):
    with torch.no_grad():
        model.embed.weight.mul_(2)


def _untie(model):
    model.lm_head.weight = nn.Parameter(model.embed.weight.detach() * 3)


def _weight_norm_gain(model):
    with torch.no_grad():
        model.fc.parametrizations.weight.original0.mul_(2)


@pytest.mark.parametrize("build, change, names", [
    (TiedLm, _scale_embedding, r"embed\.weight, lm_head\.weight"),
    (TiedLm, _untie, r"lm_head\.weight"),
    (lambda: GatedOutput(weight_norm(nn.Linear(4, 4))), _weight_norm_gain, r"parametrizations\.weight\.original0"),
], ids=["tied_side_scaled", "untied", "weight_norm_gain"])
def test_shared_or_computed_weight_changed_after_compile(build, change, names):
    torch.manual_seed(0)
    model = build().eval()
    inputs = _ids() if isinstance(model, TiedLm) else _randn(509)()
    compiled = dycl.compile(model, inputs[0])
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5) == 2
    change(model)
    with pytest.raises(dycl.StaleWeightsError, match=names):
        compiled(inputs[0])
