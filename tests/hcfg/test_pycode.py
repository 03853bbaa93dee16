"""``hcfg.pycode`` prints statements and expressions with the meaning libcst's print has."""

from __future__ import annotations

import ast
import importlib

import libcst as cst
import pytest
from dycl.hcfg import pycode
from dycl.hcfg.pycode import compile_expression, compile_statements, expression_text, statement_text
from dycl.rewriter.walk import descendants

from dycl import rewriter

STATEMENTS = [
    "x = a\n",
    "a = b = f(x, *rest, key=1, **extra)\n",
    "t = (x,)\n",
    "t = x,\n",
    "y = x[1:]\n",
    "y = x[::2, None, ..., -1]\n",
    "y = x[0,]\n",
    "y = x[(0, 1)]\n",
    "y = x[:, :3:]\n",
    "y = -(-x) ** 2\n",
    "y = (-2) ** x\n",
    "y = not (a and b or c)\n",
    "y = a if b not in c else d is not e\n",
    "y = a < b <= c != d\n",
    "y = [a, *b, (c, d)]\n",
    "y = ((a))\n",
    "n += 1; m @= w\n",
    "return\n",
    "return a, b\n",
    "pass\n",
    "f(x).g[1](y)\n",
    "s = 'a' 'b'\n",
    "y = x.sum(dim=-1, keepdim=True).float()\n",
    "y = 1.5e-3 + 2j - 0x1F\n",
    "y = a // b % c << d >> e & f | g ^ ~h\n",
    # kinds printed by libcst
    "y = [v * 2 for v in xs if v]\n",
    "y = lambda v: v + 1\n",
    "y = f'{x}!'\n",
    "y = {'a': 1, **rest}\n",
    "y: int = 3\n",
    "del a, b\n",
    "raise ValueError('no')\n",
    "assert x, 'message'\n",
]


@pytest.mark.parametrize("text", STATEMENTS)
def test_statement_means_what_libcst_prints(text):
    stmt = cst.parse_statement(text)
    printed = statement_text(stmt)
    assert ast.dump(ast.parse(printed)) == ast.dump(ast.parse(cst.Module([stmt]).code))
    if not text.startswith("return"):  # outside a function, Python refuses it
        compile_statements([stmt], "<test>")  # checks the same in test mode, and compiles


def test_expressions_evaluate_like_eager_python():
    namespace = {"x": [3, 1, 2], "a": 2, "b": 5}
    for text in ["x[1:]", "-a ** 2", "(-a) ** 2", "a if x else b", "(a, b)[0]", "not a < b", "sorted(x)[::-1]"]:
        expression = cst.parse_expression(text)
        assert expression_text(expression).replace(" ", "") == text.replace(" ", "")
        assert eval(compile_expression(expression, "<test>"), dict(namespace)) == eval(text, dict(namespace))  # noqa: S307


def test_a_print_with_another_meaning_is_refused():
    with pytest.raises(pycode.PrintedCodeError, match="libcst prints"):
        pycode._check_same("y = -2 ** x\n", "y = (-2) ** x\n", "exec")


@pytest.mark.parametrize("name", ["blockdrop", "translation", "skipnet_rnn", "caption_googlenet", "ranet"])
def test_every_rewritten_zoo_statement_prints_the_same(name):
    zoo = importlib.import_module(f"models.{name}")
    model, _ = zoo.build()
    rewritten = rewriter.rewrite(model)
    lines = [n for n in descendants(rewritten.definition) if isinstance(n, cst.SimpleStatementLine)]
    assert len(lines) > 10
    for line in lines:
        assert ast.dump(ast.parse(statement_text(line))) == ast.dump(ast.parse(cst.Module([line]).code))
        assert statement_text(line).count("\n") == 1  # one statement per line (trace._statement_at)
