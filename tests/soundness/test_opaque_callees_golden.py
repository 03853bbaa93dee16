"""Golden snippets: callees that used to stay opaque (and be traced) are inlined.

A ``*args``/``**kwargs`` callee is bound as Python binds it (extra positionals
in a tuple, extra keywords in a dict), and a branch-free helper that turns a
tensor into a Python number is inlined so that the HCFG builder can move the
conversion to the host.
"""

from __future__ import annotations

from torch import nn

from tests.rewriter.test_golden import after, golden


class StarGate(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x, *extra, **kwargs):
        if self.fc(x).sum() > 0:
            return x * kwargs["scale"] + len(extra)
        return x


class CallsStarGate(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gate = StarGate()

    def forward(self, x):
        return self.gate(x, 7, scale=3.0)


def test_a_kwargs_callee_is_inlined_with_its_arguments_packed():
    assert after(CallsStarGate(), "inline") == golden("""
        kwargs = {'scale': 3.0}
        if self.gate.fc(x).sum() > 0:
            return x * 3.0 + 1
        else:
            return x
    """)


def normalized(x):
    scale = x.abs().max().item()
    return x / scale


class CallsNormalized(nn.Module):
    def forward(self, x):
        y = normalized(x)
        return y


def test_a_branch_free_helper_with_item_is_inlined():
    assert after(CallsNormalized(), "inline") == golden("""
        scale = x.abs().max().item()
        y = x / scale
        return y
    """)
