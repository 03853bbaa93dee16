"""Golden before/after snippets for the constructs issue 27 compiles instead of refusing:
``try`` statements (``rewriter.try_blocks``) and the forms that stay refused."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
import torch
from dycl.rewriter.locations import LocationTable
from dycl.rewriter.source import parse_function
from torch import nn

import dycl


def parsed_body(function) -> str:
    """The body of ``function`` after parsing (which splices ``try``), without location comments."""
    locations = LocationTable()
    parsed = parse_function(function, locations)
    return locations.strip(cst.Module(body=list(parsed.definition.body.body)).code).strip() + "\n"


def golden(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


class TryAroundHead(nn.Module):
    def forward(self, x):
        h = self.features(x)
        try:
            out = self.head(h)
        except Exception as exc:
            print("head failed", exc)
            out = h
        else:
            out = out * 2
        finally:
            h = None
        return out


def test_try_keeps_body_then_else_then_finally():
    assert parsed_body(TryAroundHead.forward) == golden("""
        h = self.features(x)
        out = self.head(h)
        out = out * 2
        h = None
        return out
    """)


class NestedTry(nn.Module):
    def forward(self, x):
        for i in range(2):
            try:
                try:
                    x = x + i
                except ValueError:
                    break
            except:  # noqa: E722
                continue
        return x


def test_nested_try_in_a_loop_is_spliced_from_the_inside_out():
    assert parsed_body(NestedTry.forward) == golden("""
        for i in range(2):
            x = x + i
        return x
    """)


class TryFinallyAroundLoopBreak(nn.Module):
    def forward(self, x):
        try:
            for _ in range(3):
                x = x + 1
                if x.sum() > 0:
                    break
        finally:
            x = x * 2
        return x


def test_a_break_of_a_loop_inside_the_body_is_no_exit_of_the_try():
    assert parsed_body(TryFinallyAroundLoopBreak.forward) == golden("""
        for _ in range(3):
            x = x + 1
            if x.sum() > 0:
                break
        x = x * 2
        return x
    """)


class RaisesForTheHandler(nn.Module):
    def forward(self, x):
        try:  # MARK
            if x.sum() > 0:
                raise ValueError("positive")
            y = x * 2
        except ValueError:
            y = x
        return y


class AssertsForTheHandler(nn.Module):
    def forward(self, x):
        try:  # MARK
            assert x.sum() > 0
            y = x * 2
        except AssertionError:
            y = x
        return y


class ReturnBeforeFinally(nn.Module):
    def forward(self, x):
        try:  # MARK
            return x * 2
        finally:
            print("done")


@pytest.mark.parametrize(("model_class", "construct"), [
    (RaisesForTheHandler, "a try statement whose body raises"),
    (AssertsForTheHandler, "a try statement whose body raises"),
    (ReturnBeforeFinally, "a return, break or continue inside a try statement with a finally clause"),
])
def test_try_whose_handler_or_finally_matters_is_refused_at_its_line(model_class, construct):
    with pytest.raises(dycl.UnsupportedError, match=construct) as info:
        dycl.compile(model_class().eval(), torch.randn(2, 3))
    assert "MARK" in info.value.location.source_line()
