"""Fresh hunt, family 14: inheritance and dispatch, written as libraries write them: ``super().forward``
in a subclass (one and two levels), a gating mixin, ``forward = forward_features`` in the class body,
``functools.partialmethod``, a ``classmethod`` with class state, and ``__call__`` overridden on the model
or on a submodule (a Linear subclass that rescales, a wrapper that clamps its input). ``nn.Module.__call__``
is what dycl compiles around ``forward``: a class's own ``__call__`` was skipped wherever ``forward`` was
compiled from source (the model; a submodule that branches), and is now refused at its definition; where
the submodule is exported whole the exporter runs it, and it agrees."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn as nn

from tests.soundness.fresh_hunt import Case, at, check_case, seeded


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)


class GatedBackbone(Backbone):
    def forward(self, x):
        y = super().forward(x)
        if y.sum() > 0:
            return y.relu()
        return y.tanh()


class ShiftedGatedBackbone(GatedBackbone):  # two levels of super()
    def forward(self, x):
        y = super().forward(x)
        if y.mean() > 0.3:
            return y - 1
        return y + 1


class GateMixin:
    gate_threshold = 0.0

    def gate(self, x):
        if x.mean() > self.gate_threshold:
            return x * 2
        return x / 2


class MixedHead(GateMixin, nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.gate(self.fc(x))


class FeaturesAsForward(nn.Module):  # timm-style: the class body names forward_features as forward
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward_features(self, x):
        y = self.fc(x)
        if y.sum() > 0:
            return y
        return -y

    forward = forward_features


class PartialForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def _run(self, x, mode):
        y = self.fc(x)
        if mode == "pos" and y.sum() > 0:
            return y
        return -y

    forward = functools.partialmethod(_run, mode="pos")


class CountingCalls(nn.Module):
    calls = 0

    @classmethod
    def bump(cls):
        cls.calls += 1
        return cls.calls

    def forward(self, x):
        n = self.bump()
        if x.sum() > 0:
            return x * n
        return x


class ClampingCall(nn.Module):  # input sanitised in __call__, so that forward "never sees" outliers
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1

    def __call__(self, x):
        return super().__call__(x.clamp(-5, 5))


class HalfLinear(nn.Linear):  # a library layer subclassed to rescale its output
    def __call__(self, x):
        return super().__call__(x) * 0.5


class WithHalfLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = HalfLinear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        if y.sum() > 0:
            return y
        return -y


class HalvedBranch(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1

    def __call__(self, x):
        return super().__call__(x) * 0.5


class WithHalvedBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = HalvedBranch()

    def forward(self, x):
        y = self.inner(x)
        if y.mean() > 0.5:
            return y
        return -y


def _randn(seed):
    def make():
        g = seeded(seed)
        return [torch.randn(2, 4, generator=g) * 2 + (i % 2 - 0.5) * 2 for i in range(50)]
    return make


def _with_outliers():
    inputs = _randn(406)()
    return [x * 10 if i % 7 == 3 else x for i, x in enumerate(inputs)]


CASES = {
    "super_forward": Case(GatedBackbone, _randn(401), 2),
    "super_forward_two_levels": Case(ShiftedGatedBackbone, _randn(402), 3),
    "gating_mixin": Case(MixedHead, _randn(403), 2),
    "forward_alias_in_class_body": Case(FeaturesAsForward, _randn(404), 2),
    "partialmethod_forward": Case(PartialForward, _randn(405), 2,
                                  refused=at("bool", 'if mode == "pos" and y.sum() > 0:')),
    "classmethod_with_class_state": Case(CountingCalls, _randn(407), 2, refused=at("mixes", "n = self.bump()")),
    "model_overrides_call": Case(ClampingCall, _with_outliers, 2,
                                 refused=at(r"ClampingCall\.__call__, which overrides", "def __call__(self, x):")),
    "library_subclass_overrides_call": Case(WithHalfLinear, _randn(408), 2),
    "branching_submodule_overrides_call": Case(WithHalvedBranch, _randn(409), 2, refused=at(
        r"HalvedBranch\.__call__, which overrides", "def __call__(self, x):")),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_dispatch(name, tmp_path):
    case = CASES[name]
    assert check_case(case, tmp_path) == case.paths
