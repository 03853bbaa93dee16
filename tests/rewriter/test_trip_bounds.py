"""``range(n)`` with ``n`` from data and a static cap (``rewriter.trip_bounds``): golden snippets of
``unroll`` (the stop computed once before the loop, each iteration run only while its value is below
it) and the value calculus on its own: what it proves, and what it must not."""

from __future__ import annotations

import libcst as cst
import pytest
import torch
import torch.nn as nn
from dycl.rewriter.bounded_rows import Definitions
from dycl.rewriter.trip_bounds import ValueCalculus
from dycl.rewriter.values import Static

from tests.rewriter.test_golden import after, golden


class Capped(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        n = min(int(x.sum()), 2)
        for i in range(n):
            x = self.proj(x) + i
        return x


def test_a_capped_count_unrolls_to_the_cap_with_a_guard_per_iteration():
    assert after(Capped(), "unroll") == golden("""
        n = min(int(x.sum()), 2)
        stop = n
        if not (stop > 0):
            pass
        else:
            i = 0
            x = self.proj(x) + i
            if not (stop > 1):
                pass
            else:
                i = 1
                x = self.proj(x) + i
        return x
    """)


class StartAndStep(nn.Module):
    def forward(self, x):
        for k in range(1, x.sum().clamp(max=5).long() + 1, 3):
            x = x * k
        return x


def test_a_range_with_a_static_start_and_step_unrolls_the_values_it_can_take():
    assert after(StartAndStep(), "unroll") == golden("""
        stop = x.sum().clamp(max=5).long() + 1
        if not (stop > 1):
            pass
        else:
            k = 1
            x = x * k
            if not (stop > 4):
                pass
            else:
                k = 4
                x = x * k
        return x
    """)


_STATICS = {"K": 5, "half": 2.5, "table": torch.zeros(3, 7), "torch": torch, "min": min, "max": max, "int": int,
            "len": len, "float": float, "round": round, "head": nn.Linear(3, 6)}


def _ceiling(expression: str, *assignments: tuple[str, str | None]) -> int | None:
    def evaluate(node):
        if isinstance(node, cst.Name) and node.value in _STATICS:
            return Static(_STATICS[node.value], node)
        if isinstance(node, (cst.Integer, cst.Float, cst.UnaryOperation)):
            return Static(eval(cst.Module([]).code_for_node(node)), node)  # a literal number
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "torch":
            return Static(getattr(torch, node.attr.value), node)
        return None

    history = Definitions()
    for name, text in assignments:
        history.assign(name, None if text is None else cst.parse_expression(text))
    return ValueCalculus(history, evaluate).ceiling(cst.parse_expression(expression), 0, history.now + 1)


@pytest.mark.parametrize("expression, expected", [
    ("min(int(x.sum()), K)", 5),
    ("min(K, x.sum().item(), 9)", 5),
    ("max(min(int(x), 3), 0)", 3),
    ("max(min(int(x), 3), y)", None),  # max needs every operand bounded
    ("int(x.abs().mean().item() * 3) % 3", 2),
    ("x % half", 2),  # a float remainder lies in [0, 2.5)
    ("min(int(x), 7) // 2", 3),
    ("min(int(x), 7) + 1", 8),
    ("min(int(x), 7) - 2", 5),
    ("min(int(x), 2) + min(int(y), 3)", 6),
    ("x.clamp(0, K)", 5), ("x.clamp(max=half).long()", 2), ("torch.clamp(x, min=0, max=3)", 3),
    ("x.clamp_max(4)", 4), ("x.clip(-1, 2)", 2), ("torch.minimum(x, min(int(y), 1))", 1),
    ("x.clamp(min=0)", None),
    ("int(x.clamp(max=half))", 2), ("round(x.clamp(max=half))", 3), ("x.clamp(max=half).ceil()", 3),
    ("x.clamp(max=K).int()", None),  # int32 could wrap
    ("float(x.clamp(max=K))", 5),
    ("head(x).argmax(-1)[0]", 5), ("torch.argmax(head(x), dim=1)", None),  # dim 1: the rank is not known
    ("head(x).argmax()", None),  # a flat index: the leading dims are not known
    ("table.argmax()", 20), ("table.argmin(1)", 6), ("(table > 0).sum()", 21), ("table.sum()", None),
    ("table.count_nonzero()", 21), ("table.size(0)", 3), ("table.shape[1]", 7), ("len(table)", 3),
    ("table.numel()", 21),
    ("x.sum()", None), ("len(x)", None), ("x.size(1)", None), ("x.topk(2)[1]", None),
    ("min(int(x), K) if c else 3", 5), ("min(int(x), K) if c else x", None),
])
def test_the_value_calculus_proves_caps_and_nothing_else(expression, expected):
    assert _ceiling(expression) == expected


def test_the_value_calculus_follows_definitions_as_they_were_when_read():
    assert _ceiling("n", ("n", "min(int(x), K)")) == 5
    assert _ceiling("n", ("m", "min(int(x), 4)"), ("n", "m + 1"), ("m", "int(x)")) == 5  # m changed after n
    assert _ceiling("n", ("n", "m + 1"), ("m", "min(int(x), 4)")) is None  # m assigned after n read it
    assert _ceiling("n", ("n", None)) is None  # assigned under a branch: forgotten
