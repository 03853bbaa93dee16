"""Constructs dycl cannot compile raise UnsupportedError naming the construct and file:line."""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn as nn

import dycl
from dycl import rewriter

COUNTER = 0


def _line_of(function, marker: str) -> int:
    lines, first = inspect.getsourcelines(function)
    for offset, text in enumerate(lines):
        if marker in text:
            return first + offset
    raise AssertionError(f"marker {marker!r} not found")


class UnboundedWhile(nn.Module):
    def forward(self, x):
        while x.sum() > 0:  # MARK
            x = x - 1
        return x


class Recursive(nn.Module):
    def forward(self, x):
        return self._halve(x)

    def _halve(self, x):
        if x.sum() > 1:
            return self._halve(x / 2)  # MARK
        return x


class Generator(nn.Module):
    def forward(self, x):
        yield x  # MARK


class TryBlock(nn.Module):
    def forward(self, x):
        try:  # MARK
            if x.sum() > 0:
                raise RuntimeError("positive")
            y = x * 2
        except RuntimeError:
            y = x
        return y


class GlobalStatement(nn.Module):
    def forward(self, x):
        global COUNTER  # MARK
        COUNTER += 1
        return x


class EscapingNestedFunction(nn.Module):
    def forward(self, x):
        def inner(t):
            return t + 1
        helpers = [inner]  # MARK
        return helpers[0](x)


class LambdaPassedToPython(nn.Module):
    def forward(self, x):
        return list(map(lambda t: t * 2, [x, -x]))[0]  # MARK  (max/min/sorted(key=lambda) compile: test_choices)


class AttributeAssignment(nn.Module):
    def forward(self, x):
        self.last = x  # an attribute forward() creates: compiled (tests/state/test_hooks_with_state.py)
        return x + self.last  # MARK  (but not read back)


class OpenFile(nn.Module):
    def forward(self, x):
        with open("/dev/null") as handle:  # MARK
            handle.read()
        return x


class SuperCall(nn.Linear):
    def forward(self, x):
        forward = super().forward  # MARK
        return forward(x) * 2


class LoopOverTensor(nn.Module):
    def forward(self, x):
        total = 0
        for row in x:  # MARK
            total = total + row
        return total


class ImportInside(nn.Module):
    def forward(self, x):
        from tests.rewriter import lazy_import_target  # MARK (not loaded: an import of math is lowered)

        return x * lazy_import_target.SCALE


class DynamicWhileCounter(nn.Module):
    def forward(self, x):
        steps = 0
        while steps < 10:  # MARK
            if x.sum() > 0:
                steps += 1
            x = x * 2
        return x


CASES = [
    (UnboundedWhile, "while loop whose condition depends on the input"),
    (Recursive, "recursion"),
    (Generator, "yield"),
    (TryBlock, "try statement"),
    (GlobalStatement, "global statement"),
    (EscapingNestedFunction, "nested function inner used as a value"),
    (LambdaPassedToPython, "lambda"),
    (AttributeAssignment, "a read of last, an attribute that forward() or a hook creates"),
    (OpenFile, "with statement other than torch.no_grad()"),
    (SuperCall, "super()"),
    (LoopOverTensor, "for loop over a value that is not known at compile time"),
    (ImportInside, "import statement"),
    (DynamicWhileCounter, "while loop whose condition depends on the input"),
]


@pytest.mark.parametrize(("model_class", "construct"), CASES, ids=[c[0].__name__ for c in CASES])
def test_unsupported_construct_names_construct_and_line(model_class, construct):
    model = model_class(4, 4) if issubclass(model_class, nn.Linear) else model_class()
    with pytest.raises(dycl.UnsupportedError) as info:
        rewriter.rewrite(model)
    error = info.value
    assert construct in str(error)
    marked = model_class._halve if model_class is Recursive else model_class.forward
    expected_line = _line_of(marked, "MARK")
    assert error.location is not None
    assert error.location.path == inspect.getsourcefile(model_class)
    assert error.location.line == expected_line
    assert f"{__file__}:{expected_line}" in str(error)
    assert "^" in str(error), "the message shows the offending line with a marker"


def test_unsupported_error_is_the_same_class_everywhere():
    assert dycl.UnsupportedError is rewriter.UnsupportedError


def test_builtin_method_without_source():
    class Builtin(nn.Module):
        forward = torch.relu

    with pytest.raises(dycl.UnsupportedError, match="no Python source"):
        rewriter.rewrite(Builtin())


def test_lambda_forward_is_read_as_the_def_it_stands_for():
    class LambdaForward(nn.Module):
        forward = lambda self, x: x * 2  # noqa: E731

    result = rewriter.rewrite(LambdaForward())
    assert result.locations.strip(result.source).strip().splitlines()[1:] == ["    return (x * 2)"]


def test_missing_method():
    with pytest.raises(dycl.UnsupportedError, match="does not exist"):
        rewriter.rewrite(nn.Linear(2, 2), method="decode")
