"""Golden before/after snippets for ``rewriter.higher_order``: torch.cond, map, nested
functions and lambdas desugared into plain code, and the forms it refuses."""

from __future__ import annotations

import contextlib
import textwrap

import pytest
import torch
from dycl.rewriter.locations import LocationTable
from dycl.rewriter.source import parse_function
from functorch.experimental.control_flow import map as control_flow_map
from torch import nn

import dycl
from tests.rewriter.golden import golden


def desugared(model_class: type) -> str:
    """The body of ``model_class.forward`` after parsing (which desugars), without location comments."""
    locations = LocationTable()
    parsed = parse_function(model_class.forward, locations)
    text = locations.strip(textwrap.dedent("".join(
        __import__("libcst").Module(body=list(parsed.definition.body.body)).code)))
    return text.strip() + "\n"




def module_true(x):
    return x.cos()


def module_false(x):
    return x.sin()


class CondNested(nn.Module):
    def forward(self, x, y):
        def true_fn(a, b):
            return a + b * 2

        def false_fn(a, b):
            return a - b

        return torch.cond(x.sum() > 0, true_fn, false_fn, [x, y + 1])


def test_cond_becomes_if_else_with_inlined_branches():
    assert desugared(CondNested) == golden("""
        operand_1 = y + 1
        if x.sum() > 0:
            return x + operand_1 * 2
        else:
            return x - operand_1
    """)


class CondLambdaAssigned(nn.Module):
    def forward(self, x):
        scale = x.abs().max()
        out = torch.cond(x.shape[0] > 2, lambda t: t * scale, lambda t: t / scale, (x,))
        return out + 1


def test_cond_with_lambdas_and_a_closure_read_assigns_the_call_target():
    assert desugared(CondLambdaAssigned) == golden("""
        scale = x.abs().max()
        if x.shape[0] > 2:
            out = x * scale
        else:
            out = x / scale
        return out + 1
    """)


class CondMethods(nn.Module):
    def true_branch(self, x):
        return x.relu()

    def forward(self, x):
        return torch.cond(x.mean() > 0, self.true_branch, module_false, [x])


def test_cond_with_a_method_and_a_module_function_keeps_their_calls_for_the_inliner():
    assert desugared(CondMethods) == golden("""
        if x.mean() > 0:
            return self.true_branch(x)
        else:
            return module_false(x)
    """)


class NestedWithEarlyReturn(nn.Module):
    def forward(self, x):
        def helper(t, k=2):
            h = t * k
            if h.sum() > 0:
                return h
            h = -h
            return h + 1

        y = helper(x) + helper(x, k=3)
        return y


def test_nested_function_is_inlined_at_each_call_with_fresh_locals_and_structured_returns():
    assert desugared(NestedWithEarlyReturn) == golden("""
        h_1 = x * 2
        if h_1.sum() > 0:
            out_1 = h_1
        else:
            h_1 = -h_1
            out_1 = h_1 + 1
        h_2 = x * 3
        if h_2.sum() > 0:
            out_2 = h_2
        else:
            h_2 = -h_2
            out_2 = h_2 + 1
        y = out_1 + out_2
        return y
    """)


class NonlocalCounter(nn.Module):
    def forward(self, x):
        calls = 0

        def step(t):
            nonlocal calls
            calls += 1
            return t * 2

        y = step(step(x))
        return y + calls


def test_nonlocal_writes_go_to_the_enclosing_variable():
    assert desugared(NonlocalCounter) == golden("""
        calls = 0
        calls += 1
        out_1 = x * 2
        calls += 1
        y = out_1 * 2
        return y + calls
    """)


class MapBody(nn.Module):
    def forward(self, xs, y):
        def body(x, y):
            return x * y + 1

        return control_flow_map(body, xs, y)


def test_map_becomes_a_stacked_comprehension_over_the_leading_dim():
    assert desugared(MapBody) == golden("""
        return torch.stack([xs[i_1] * y + 1 for i_1 in range(xs.shape[0])])
    """)


class Recursive(nn.Module):
    def forward(self, x):
        def again(t):
            return again(t - 1)  # MARK

        return again(x)


class Escaping(nn.Module):
    def forward(self, x):
        def helper(t):
            return t + 1

        return [helper][0](x)  # MARK


class ReturnInLoop(nn.Module):
    def forward(self, x):
        def first_positive(t):
            for row in t:  # MARK
                if row.sum() > 0:
                    return row
            return t[0]

        return first_positive(x)


class CallInBoolean(nn.Module):
    def forward(self, x):
        def big(t):
            return t.sum() > 0

        if x.mean() > 0 and big(x):  # MARK
            return x
        return -x


class OperandsNotWritten(nn.Module):
    def forward(self, x):
        operands = [x]
        return torch.cond(x.sum() > 0, module_true, module_false, operands)  # MARK


@pytest.mark.parametrize(("model_class", "construct"), [
    (Recursive, "recursion (the nested function again calls itself)"),
    (Escaping, "the nested function helper used as a value"),
    (ReturnInLoop, "a return inside a loop or with block of a nested function"),
    (CallInBoolean, "a conditionally evaluated call"),
    (OperandsNotWritten, "torch.cond whose operands are not a list or tuple written out"),
], ids=lambda v: v.__name__ if isinstance(v, type) else "")
def test_refused_forms_name_the_construct_and_the_line(model_class, construct):
    with pytest.raises(dycl.UnsupportedError) as info:
        dycl.compile(model_class().eval(), torch.randn(3, 2))
    assert construct in str(info.value)
    assert info.value.location is not None
    assert "MARK" in info.value.location.source_line()


class DefinedInBranch(nn.Module):
    def forward(self, x):
        if x.shape[0] > 1:
            def helper(t):
                return t + 1
        return helper(x)  # MARK


def test_a_nested_function_used_outside_its_block_is_refused():
    with pytest.raises(dycl.UnsupportedError, match="nested function helper used outside the block") as info:
        dycl.compile(DefinedInBranch().eval(), torch.randn(3, 2))
    assert "MARK" in info.value.location.source_line()


class CondKeywordsAndHelperPredicate(nn.Module):
    def forward(self, x):
        def is_big(t):
            return t.abs().max() > 2

        def shrink(t):
            return t / 2

        return torch.cond(pred=is_big(x), true_fn=shrink, false_fn=lambda t: t, operands=(x,))


def test_cond_by_keyword_with_a_nested_function_in_the_predicate():
    assert desugared(CondKeywordsAndHelperPredicate) == golden("""
        out_1 = x.abs().max() > 2
        if out_1:
            return x / 2
        else:
            return x
    """)


class RebindsWhatTheExpressionReads(nn.Module):
    def forward(self, x):
        k = 1

        def bump():
            nonlocal k
            k = k + 1
            return k

        return x * k + bump()  # MARK


def test_a_nonlocal_rebinding_that_would_reorder_reads_is_refused():
    # Python reads k (1) before bump() rebinds it: hoisting bump() would read 2
    with pytest.raises(dycl.UnsupportedError, match="rebinds k") as info:
        dycl.compile(RebindsWhatTheExpressionReads().eval(), torch.randn(3, 2))
    assert "MARK" in info.value.location.source_line()


class NullContexts(nn.Module):
    def forward(self, x):
        ctx = contextlib.nullcontext()
        with ctx:
            y = x.sin()
        with contextlib.nullcontext():
            return y + x.cos()


class ContextUsedElsewhere(nn.Module):
    def forward(self, x):
        ctx = contextlib.nullcontext()
        with ctx:  # MARK
            y = x.sin()
        print(ctx)
        return y


def test_null_contexts_are_spliced():
    assert desugared(NullContexts) == golden("""
        y = x.sin()
        return y + x.cos()
    """)


def test_a_null_context_also_used_as_a_value_is_left_to_normalize_and_refused():
    with pytest.raises(dycl.UnsupportedError, match="with statement") as info:
        dycl.compile(ContextUsedElsewhere().eval(), torch.randn(3, 2))
    assert "MARK" in info.value.location.source_line()
