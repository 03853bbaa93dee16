"""An expression put into another keeps its meaning: parentheses by precedence (``rewriter.precedence``).

Before this, ``n ** x`` with ``n = -2`` was rewritten to ``-2 ** x`` (Python reads
``-(2 ** x)``) and ``x * (x if flag else x + 1)`` with ``flag = False`` to ``x * x + 1``:
the compiled model gave other numbers than eager, silently.
"""

from __future__ import annotations

import libcst as cst
import pytest
import torch
from dycl.rewriter.precedence import binary
from dycl.rewriter.substitute import replace_names
from dycl.rewriter.values import literal_term
from dycl.rewriter.verify import RewriteInvariantError, verify_printed
from dycl.rewriter.walk import map_children
from rewrite_checks import build, check
from torch import nn

import dycl
from dycl.harness.testing import assert_equivalent


def _substituted(expression: str, **terms: str | int) -> str:
    parsed = {name: literal_term(t) if isinstance(t, int) else cst.parse_expression(t) for name, t in terms.items()}
    return cst.Module([]).code_for_node(replace_names(cst.parse_expression(expression), parsed.get))


@pytest.mark.parametrize(("expression", "terms", "expected"), [
    ("n ** x", {"n": -2}, "(-2) ** x"),
    ("x ** n", {"n": -1}, "x ** -1"),
    ("x * n", {"n": "a + b"}, "x * (a + b)"),
    ("n * x", {"n": "a + b"}, "(a + b) * x"),
    ("n - x", {"n": "a - b"}, "a - b - x"),
    ("x - n", {"n": "a - b"}, "x - (a - b)"),
    ("-n", {"n": "a ** b"}, "-a ** b"),
    ("-n", {"n": "a * b"}, "-(a * b)"),
    ("not n", {"n": "a < b"}, "not a < b"),
    ("a < n", {"n": "b < c"}, "a < (b < c)"),
    ("n and c", {"n": "a or b"}, "(a or b) and c"),
    ("n if c else d", {"n": "a if b else e"}, "(a if b else e) if c else d"),
    ("c if d else n", {"n": "a if b else e"}, "c if d else a if b else e"),
    ("n.real", {"n": 1}, "(1).real"),
    ("n.real", {"n": -1}, "(-1).real"),
    ("n[0]", {"n": "a + b"}, "(a + b)[0]"),
    ("n(x)", {"n": "lambda t: t"}, "(lambda t: t)(x)"),
    ("f(n, x)", {"n": "a, b"}, "f((a, b), x)"),
    ("[n for i in r]", {"n": "a - b"}, "[a - b for i in r]"),
    ("x @ n", {"n": "a @ b"}, "x @ (a @ b)"),
])
def test_substitution_parenthesises_by_precedence(expression, terms, expected):
    assert _substituted(expression, **terms) == expected
    # the printed text reads back as the same tree (whitespace aside)
    assert cst.parse_expression(expected).deep_equals(cst.parse_expression(_substituted(expression, **terms)))


def test_statement_values_and_targets_stay_bare():
    statement = cst.parse_statement("x = n\n")
    replaced = replace_names(statement, {"n": cst.parse_expression("a, b")}.get)
    assert cst.Module([replaced]).code == "x = a, b\n"
    walrus = replace_names(statement, {"n": cst.parse_expression("(y := f())").with_changes(lpar=[], rpar=[])}.get)
    assert cst.Module([walrus]).code == "x = (y := f())\n"


def test_augmented_assignment_operand():
    combined = binary(cst.Name("n"), cst.Multiply(), cst.parse_expression("a + b"))
    assert cst.Module([]).code_for_node(combined) == "n * (a + b)"


def test_map_children_parenthesises_what_it_changes():
    product = cst.parse_expression("x * (y)")
    unwrapped = map_children(product, lambda child: cst.parse_expression("a + b") if child is product.right else child)
    assert cst.Module([]).code_for_node(unwrapped) == "x * (a + b)"


class _Shifted(nn.Module):
    """A callee whose parameters are used under tighter operators than its arguments."""

    def forward(self, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        if p.sum() > 0:
            return p * 2 - q
        return -p ** 2


class _StaticOperands(nn.Module):
    """Static values (a negative attribute, a flag) folded into arithmetic, the way model code reads."""

    def __init__(self) -> None:
        super().__init__()
        self.scale_exponent = -3
        self.use_identity = False
        self.head = _Shifted()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        base = -2
        powered = base ** x.round()
        shifted = x * (x if self.use_identity else x + 1)
        scaled = self.scale_exponent ** torch.sign(x)
        both = self.head(x + 1, x - 1) * 3
        gain = 2
        gain *= x + 1  # a static number times a tensor expression: 2 * (x + 1)
        if powered.mean() > 0:
            powered = powered - 1
        return powered, shifted, scaled, both, gain


def test_folded_operands_compute_what_eager_computes():
    model = build(_StaticOperands)
    inputs = [torch.randn(4) * 2 for _ in range(24)]
    checked = check(model, inputs, min_paths=3)
    assert "(-2) ** " in checked.source and "x * (x + 1)" in checked.source and "2 * (x + 1)" in checked.source
    compiled = dycl.compile(model, inputs[0])
    assert assert_equivalent(model, compiled, inputs, min_paths=3, atol=1e-5) >= 3


def test_a_tree_that_prints_as_another_is_refused_in_check_mode():
    power = cst.BinaryOperation(cst.UnaryOperation(cst.Minus(), cst.Integer("2")), cst.Power(), cst.Name("x"))
    line = cst.SimpleStatementLine([cst.Return(power)])
    definition = cst.parse_module("def f(x):\n    pass\n").body[0]
    definition = definition.with_changes(body=definition.body.with_changes(body=[line]))
    source = cst.Module([definition]).code
    assert "return -2 ** x" in source
    with pytest.raises(RewriteInvariantError, match="return -2 \\*\\* x"):
        verify_printed(definition, source)
    fixed = definition.with_changes(body=definition.body.with_changes(
        body=[line.with_changes(body=[cst.Return(binary(power.left, cst.Power(), power.right))])]))
    verify_printed(fixed, cst.Module([fixed]).code)
