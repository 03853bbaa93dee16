"""The rows of an input along a static dim (``rewriter.tensor_rows``): golden snippets of ``unroll``
given the sizes ``dynamic=`` leaves static, and the row count on its own: what it proves exactly,
and the symbolic dim it names instead of a count."""

from __future__ import annotations

import libcst as cst
import pytest
import torch
import torch.nn as nn
from dycl.rewriter.bounded_rows import Calculus, Definitions
from dycl.rewriter.tensor_rows import SymbolicDim, rows, size_of
from dycl.rewriter.values import Static

from dycl import rewriter
from dycl.model.dynamic import static_sizes
from tests.rewriter.golden import golden


def _after_unroll(model: nn.Module, **example: torch.Tensor) -> str:
    result = rewriter.rewrite(model, debug=True, example=example, static_sizes=static_sizes(True, example))
    source = next(src for name, _, src in reversed(result.trace) if name == "unroll")
    return result.locations.strip(source).strip() + "\n"


class Columns(nn.Module):
    def forward(self, x, y):
        acc = x[:, 0] * 0
        for i, (a, b) in enumerate(zip(x.unbind(1), y.T)):
            acc = acc + a * b[0] * i
        return acc


def test_zip_of_an_inputs_columns_unrolls_to_the_static_size():
    source = _after_unroll(Columns(), x=torch.randn(2, 3), y=torch.randn(2, 3))
    assert source == golden("""
        acc = x[:, 0] * 0
        i = 0
        a = x.unbind(1)[0]
        b = y.T[0]
        acc = acc + a * b[0] * i
        i = 1
        a = x.unbind(1)[1]
        b = y.T[1]
        acc = acc + a * b[0] * i
        i = 2
        a = x.unbind(1)[2]
        b = y.T[2]
        acc = acc + a * b[0] * i
        return acc
    """)


class Steps(nn.Module):
    def forward(self, x):
        for t in range(x.shape[1]):
            x = x + t
        return x


def test_a_range_over_a_static_size_unrolls_to_it_exactly():
    assert _after_unroll(Steps(), x=torch.randn(2, 2)) == golden("""
        t = 0
        x = x + t
        t = 1
        x = x + t
        return x
    """)


class CappedBySize(nn.Module):
    def forward(self, x):
        for t in range(min(x.shape[1], int(x.sum()))):
            x = x + t
        return x


def test_a_count_capped_by_a_static_size_unrolls_to_it_with_a_guard_per_iteration():
    assert _after_unroll(CappedBySize(), x=torch.randn(2, 2)) == golden("""
        stop = min(x.shape[1], int(x.sum()))
        if not (stop > 0):
            pass
        else:
            t = 0
            x = x + t
            if not (stop > 1):
                pass
            else:
                t = 1
                x = x + t
        return x
    """)


def _rows(expression: str, *assignments: tuple[str, str | None], sizes=None, read=rows):
    statics = {"torch": torch, "len": len}

    def evaluate(node):
        if isinstance(node, cst.Name) and node.value in statics:
            return Static(statics[node.value], node)
        if isinstance(node, (cst.Integer, cst.UnaryOperation)):
            return Static(int(cst.Module([]).code_for_node(node)), node)
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "torch":
            return Static(getattr(torch, node.attr.value), node)
        return None

    history = Definitions()
    for name, text in assignments:
        history.assign(name, None if text is None else cst.parse_expression(text))
    return read(cst.parse_expression(expression), Calculus(history, evaluate),
                sizes if sizes is not None else {"x": (None, 3, 5), "w": (4, 6)})


@pytest.mark.parametrize("expression, expected", [
    ("x[0]", 3), ("x[0, 1]", 5), ("x[:, 2]", SymbolicDim("x", 0)), ("x[0][:, 1]", 3),
    ("x.unbind(1)", 3), ("x.unbind(dim=-1)", 5), ("torch.unbind(x, 2)", 5), ("x.unbind()", SymbolicDim("x", 0)),
    ("w.T", 6), ("w.t()", 6), ("x.transpose(0, 2)", 5), ("x.permute(1, 0, 2)", 3), ("x.float()[0]", 3),
    ("x", SymbolicDim("x", 0)), ("w", 4),
    ("w[1:]", 3), ("w[-2:]", 2), ("w[::3]", 2), ("w[1:99]", 3), ("w[:, 1:]", 4), ("w[1:].T", 6), ("x[1:]", None),
    ("x[0, i:]", None),
    ("x[idx]", None), ("x[None]", None), ("y", None), ("x.flip(0)", None),
    ("x.unbind(3)", None), ("w.T.T.unsqueeze(0)", None),
])
def test_the_row_count_is_exact_or_names_the_symbolic_dim(expression, expected):
    assert _rows(expression) == expected


_PROJ = nn.Linear(5, 12)


@pytest.mark.parametrize("expression, expected", [
    ("proj(x).unbind(2)", 12), ("proj(x).view(b, 3, 4, -1).unbind(2)", 4), ("proj(x).reshape(b, 3, -1, 2)[0]", 3),
    ("proj(x).view(b, 36).T", 36), ("x.view(x.size(0), -1).T", 15), ("x.view(b, 5, 3).unbind(1)", 5),
    ("proj(x).view(b, 3, -1).unbind(2)", 12),
    ("proj(x).view(-1, 12)", None), ("proj(x).view(3, b, 12)[0]", SymbolicDim("x", 0)), ("x.view(b, 4, -1)", None),
    ("x.view(b, 16)", None), ("x.view(n, 5, 3)", None), ("w.view(3, 8)", 3), ("w.view((2, 12))", 2),
    ("act(proj(x)).unbind(2)", 12), ("torch.relu(proj(x)).unbind(2)", 12), ("proj(x).tanh().unbind(2)", 12),
    ("act(proj(x), x)", None), ("proj(w.T)", None), ("proj(w)", None), ("wide(x)", None), ("proj(x, x)", None),
])
def test_a_computed_tensors_rows_follow_linears_and_reshapes(expression, expected):
    class Wide(nn.Linear):
        def forward(self, x):
            return super().forward(x).repeat(1, 2)

    def evaluate(node):
        known = {"torch": torch, "proj": _PROJ, "wide": Wide(5, 12), "act": nn.GELU()}
        if isinstance(node, cst.Name) and node.value in known:
            return Static(known[node.value], node)
        if isinstance(node, (cst.Integer, cst.UnaryOperation)):
            return Static(int(cst.Module([]).code_for_node(node)), node)
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "torch":
            return Static(getattr(torch, node.attr.value), node)
        if isinstance(node, cst.Tuple):
            return Static(tuple(int(cst.Module([]).code_for_node(e.value)) for e in node.elements), node)
        return None

    history = Definitions()
    history.assign("b", cst.parse_expression("x.shape[0]"))
    history.assign("n", cst.parse_expression("idx.sum()"))
    found = rows(cst.parse_expression(expression), Calculus(history, evaluate), {"x": (None, 3, 5), "w": (4, 6)})
    assert found == expected


def test_the_row_count_follows_names_only_to_definitions_that_reach():
    assert _rows("planes", ("planes", "x[0].unbind(1)")) == 5
    assert _rows("r", ("r", "x[0]"), ("x", "other")) == 3  # x as it was when r was made
    assert _rows("x[0]", ("x", "other")) is None  # x assigned: no longer the input
    assert _rows("p", ("p", None)) is None  # assigned under a branch


class Best(nn.Module):
    def forward(self, x):
        rows = list(x[0])
        loud = max(x.unbind(2), key=lambda c: c.mean())
        return max(rows, key=lambda r: r.sum()), loud


def test_an_inputs_rows_taken_as_a_sequence_become_a_display():
    assert _after_unroll(Best(), x=torch.randn(2, 2, 2)) == golden("""
        rows = [x[0][0], x[0][1]]
        loud = max((x.unbind(2)[0], x.unbind(2)[1]), key=lambda c: c.mean())
        return max(rows, key=lambda r: r.sum()), loud
    """)


@pytest.mark.parametrize("expression, expected", [
    ("x.size(1)", 3), ("x.shape[-1]", 5), ("len(w)", 4), ("len(x[0])", 3), ("w.T.size(0)", 6), ("n", 3),
    ("m", 4), ("x.size(2) // 2", 2), ("len(w) * x.size(1) - 1", 11), ("x.size(1) // 0", None),
    ("x.size(0)", None), ("len(x)", None), ("x.size(i)", None), ("w.size()", None), ("x.size(0) - 1", None),
])
def test_an_exact_size_is_read_only_from_a_static_dim(expression, expected):
    assert _rows(expression, ("n", "x.size(1)"), ("m", "x.size(1) + 1"), read=size_of) == expected
