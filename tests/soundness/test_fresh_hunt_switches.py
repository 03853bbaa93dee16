"""Fresh hunt, family 12: global switches and context managers the exceptions hunt did not try
(``torch.enable_grad()``, ``warnings.catch_warnings()``, ``contextlib.suppress``, a context
chosen by a flag, ``warnings.warn`` on a data branch, ``torch.set_grad_enabled(False)`` and
``torch.set_default_dtype`` called in ``forward``, a branch on ``torch.backends`` or on
``torch.are_deterministic_algorithms_enabled()``). The host cannot call torch, and a switch
changes the process: each is compiled as eager runs it, or refused at its line."""

from __future__ import annotations

import contextlib
import warnings

import pytest
import torch
import torch.nn as nn

from tests.soundness.fresh_hunt import Case, at, check_case, seeded


class EnableGradBlock(nn.Module):
    def forward(self, x):
        with torch.enable_grad():
            y = x * 2
        if y.sum() > 0:
            return y
        return -y


class WarnOnLarge(nn.Module):
    def forward(self, x):
        if x.abs().max() > 2:
            warnings.warn("large activation, clipping", stacklevel=2)
            x = x.clamp(-2, 2)
        return x * 2


class QuietBlock(nn.Module):
    def forward(self, x):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = x * 2
        if y.sum() > 0:
            return y
        return -y


class SuppressBlock(nn.Module):
    def forward(self, x):
        with contextlib.suppress(ZeroDivisionError):
            x = x * 2
        if x.sum() > 0:
            return x
        return -x


class ContextByFlag(nn.Module):
    def __init__(self):
        super().__init__()
        self.amp = False

    def forward(self, x):
        ctx = torch.autocast("cpu") if self.amp else contextlib.nullcontext()
        with ctx:
            y = x * 2
        if y.sum() > 0:
            return y
        return -y


class GradSwitchCall(nn.Module):
    def forward(self, x):
        previous = torch.is_grad_enabled()
        torch.set_grad_enabled(False)
        y = x * 2
        torch.set_grad_enabled(previous)
        if y.sum() > 0:
            return y
        return -y


class DefaultDtypeCall(nn.Module):
    def forward(self, x):
        torch.set_default_dtype(torch.float32)
        z = torch.zeros(x.shape)
        if x.sum() > 0:
            return z + x
        return z - x


class BackendBranch(nn.Module):
    def forward(self, x):
        if torch.backends.mkldnn.is_available():
            x = x + 1
        if x.sum() > 0:
            return x
        return -x


def _inputs(seed, spread=1.5):
    def make():
        g = seeded(seed)
        return [torch.randn(2, 4, generator=g) + (i % 2 - 0.5) * 2 * spread for i in range(50)]
    return make


def _wide_inputs():
    g = seeded(137)
    return [torch.randn(2, 4, generator=g) * (0.3 if i % 2 else 2.0) for i in range(50)]


CASES = {
    "enable_grad_block": Case(EnableGradBlock, _inputs(131), 2),
    "warn_on_branch": Case(WarnOnLarge, _wide_inputs, 2),
    "catch_warnings_block": Case(QuietBlock, _inputs(132), 2,
                                 refused=at("with statement", "with warnings.catch_warnings():")),
    "suppress_block": Case(SuppressBlock, _inputs(133), 2,
                           refused=at("with statement", "with contextlib.suppress(ZeroDivisionError):")),
    "context_by_flag": Case(ContextByFlag, _inputs(134), 2, refused=at("with statement", "with ctx:")),
    "set_grad_enabled_call": Case(GradSwitchCall, _inputs(135), 2,
                                  refused=at("needs 'torch'", "torch.set_grad_enabled(False)")),
    "set_default_dtype_call": Case(DefaultDtypeCall, _inputs(136), 2,
                                   refused=at("needs 'torch'", "torch.set_default_dtype(torch.float32)")),
    "backends_branch": Case(BackendBranch, _inputs(138), 2,
                            refused=at("needs 'torch'", "if torch.backends.mkldnn.is_available():")),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_switch_or_context(name, tmp_path):
    case = CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # WarnOnLarge's own warning, on every call
        assert check_case(case, tmp_path) == case.paths
