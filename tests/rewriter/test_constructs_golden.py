"""Golden before/after snippets for the constructs issue 27 compiles instead of refusing:
``try`` statements (``rewriter.try_blocks``) and the forms that stay refused."""

from __future__ import annotations

import libcst as cst
import pytest
import torch
from dycl.rewriter.locations import LocationTable
from dycl.rewriter.source import parse_function
from torch import nn

import dycl
from tests.rewriter.golden import after, golden


def parsed_body(function) -> str:
    """The body of ``function`` after parsing (which splices ``try``), without location comments."""
    locations = LocationTable()
    parsed = parse_function(function, locations)
    return locations.strip(cst.Module(body=list(parsed.definition.body.body)).code).strip() + "\n"




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




class Converge(nn.Module):
    def __init__(self):
        super().__init__()
        self.step_fn = nn.Linear(4, 4)
        self.max_steps = 2

    def forward(self, x):
        steps = 0
        while x.norm() > 1.0 and steps < self.max_steps:
            x = self.step_fn(x)
            steps += 1
        return x, steps


def test_while_bounded_by_a_counter_and_a_tensor_test_unrolls_to_the_bound():
    assert after(Converge(), "unroll") == golden("""
        steps = 0
        if not (x.norm() > 1.0):
            pass
        else:
            x = self.step_fn(x)
            steps += 1
            if not (x.norm() > 1.0):
                pass
            else:
                x = self.step_fn(x)
                steps += 1
        return x, steps
    """)


class CounterFirst(nn.Module):
    def forward(self, x):
        steps = 0
        while steps < 1 and x.sum() > 0 and x.max() < 5:
            x = x - 1
            steps += 1
        return x


def test_every_dynamic_conjunct_guards_the_iteration():
    assert after(CounterFirst(), "unroll") == golden("""
        steps = 0
        if not (x.sum() > 0 and x.max() < 5):
            pass
        else:
            x = x - 1
            steps += 1
        return x
    """)


class UnboundedConjunction(nn.Module):
    def forward(self, x):
        while x.sum() > 0 and x.max() < 5:  # MARK
            x = x - 1
        return x


class CounterLoopWithElse(nn.Module):
    def forward(self, x):
        steps = 0
        while x.sum() > 0 and steps < 3:  # MARK
            x = x - 1
            steps += 1
        else:
            x = x * 2
        return x


@pytest.mark.parametrize(("model_class", "construct"), [
    (UnboundedConjunction, "a while loop whose condition depends on the input"),
    (CounterLoopWithElse, "a while loop with an else clause whose condition depends on the input"),
])
def test_while_without_a_static_bound_or_with_else_is_refused(model_class, construct):
    with pytest.raises(dycl.UnsupportedError, match=construct) as info:
        dycl.rewriter.rewrite(model_class())
    assert "MARK" in info.value.location.source_line()


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(x)

    def score(self, h):
        return h.mean()


class ScaledGate(Gate):
    def forward(self, x):
        h = super().forward(x)
        return super(ScaledGate, self).score(h) * h  # noqa: UP008 - the two-argument form, as older code has it


def test_super_calls_become_calls_of_the_parents_method():
    assert after(ScaledGate(), "super") == golden("""
        h = Gate.forward(self, x)
        return Gate.score(self, h) * h
    """)


class SuperAsValue(Gate):
    def forward(self, x):
        parent = super()  # MARK
        return parent.forward(x)


class SuperProperty(Gate):
    @property
    def width(self):
        return 4

    def forward(self, x):
        return x * super().width  # MARK


class WithWidth(SuperProperty):
    def forward(self, x):
        return super().forward(x) + super().width  # MARK


@pytest.mark.parametrize(("model_class", "construct"), [
    (SuperAsValue, "super() used other than to call a method"),
    (WithWidth, "super() used other than to call a method"),
])
def test_super_other_than_a_method_call_is_refused(model_class, construct):
    with pytest.raises(dycl.UnsupportedError, match=construct.replace("(", r"\(").replace(")", r"\)")) as info:
        dycl.rewriter.rewrite(model_class())
    assert "MARK" in info.value.location.source_line()


class Unfold(nn.Module):
    def __init__(self):
        super().__init__()
        self.f = nn.Linear(4, 4)

    def _apply_n(self, x, depth):
        if depth == 0:
            return x
        h = self.f(x)
        if h.mean() > 0:
            h = torch.relu(h)
        return self._apply_n(h, depth - 1)

    def forward(self, x):
        return self._apply_n(x, 2)


def test_recursion_with_a_static_depth_is_inlined_level_by_level():
    body = dycl.rewriter.rewrite(Unfold()).source
    assert dycl.rewriter.rewrite(Unfold()).locations.strip(body).strip() + "\n" == golden("""
        def forward(self, x):
            h = self.f(x)
            if h.mean() > 0:
                h = torch.relu(h)
            h_1 = self.f(h)
            if h_1.mean() > 0:
                h_1 = torch.relu(h_1)
            return self._apply_n(h_1, 0)
    """)  # depth 0 has no branch: that call stays a call


class Endless(nn.Module):
    def _grow(self, x, depth):
        return self._grow(x * 2, depth + 1)  # MARK

    def forward(self, x):
        if x.sum() > 0:
            return self._grow(x, 0)
        return x


def test_recursion_without_a_base_case_is_refused_at_a_depth_limit():
    with pytest.raises(dycl.UnsupportedError, match="more than 64 levels deep") as info:
        dycl.rewriter.rewrite(Endless())
    assert "MARK" in info.value.location.source_line()


class Walrus(nn.Module):
    def forward(self, x):
        if (s := x.sum()) > 0:
            x = x / s
        elif (m := x.abs().max()) > 1:
            x = x / m
        y = (n := (h := x * 2).norm()) + h.mean()
        for row in (rows := [x, y]):
            x = x + row * n
        return x, rows


def test_assignment_expressions_are_hoisted_before_their_statement():
    assert parsed_body(Walrus.forward) == golden("""
        s = x.sum()
        if s > 0:
            x = x / s
        else:
            m = x.abs().max()
            if m > 1:
                x = x / m
        h = x * 2
        n = h.norm()
        y = n + h.mean()
        rows = [x, y]
        for row in rows:
            x = x + row * n
        return x, rows
    """)


class WalrusAfterOr(nn.Module):
    def forward(self, x):
        if x.sum() > 0 or (m := x.max()) > 1:  # MARK
            return x
        return m


class WalrusAfterCall(nn.Module):
    def forward(self, x):
        y = self.f(x) + (x := x * 2)  # MARK
        return y


class WalrusInWhile(nn.Module):
    def forward(self, x):
        steps = 0
        while (steps := steps + 1) < 3:  # MARK
            x = x * 2
        return x


@pytest.mark.parametrize(("model_class", "construct"), [
    (WalrusAfterOr, "runs only sometimes"),
    (WalrusAfterCall, "after a call or a read of its name"),
    (WalrusInWhile, "in a while test"),
])
def test_assignment_expressions_that_hoisting_would_change_are_refused(model_class, construct):
    with pytest.raises(dycl.UnsupportedError, match=construct) as info:
        dycl.rewriter.rewrite(model_class())
    assert "MARK" in info.value.location.source_line()


class StoredLambda(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = lambda t, low=0.0: t.clamp(min=low)  # MARK

    def forward(self, x):
        return self.act(x)


def test_a_lambda_stored_on_the_module_is_read_as_the_def_it_stands_for():
    assert parsed_body(StoredLambda().act) == golden("""
        return (t.clamp(min=low))
    """)
    locations = LocationTable()
    parsed = parse_function(StoredLambda().act, locations)
    assert "MARK" in locations.resolve(parsed.definition.body.body[0]).source_line()
    assert [p.name.value for p in parsed.definition.params.params] == ["t", "low"]


class Pyramid(nn.Module):
    def __init__(self):
        super().__init__()
        self.stages = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])

    def _features(self, x):
        for stage in self.stages:
            x = stage(x)
            if x.mean() > 0:
                return
            yield x
        yield from [x, x * 2]

    def forward(self, x):
        return sum(self._features(x))


def test_a_generator_helper_is_read_as_the_list_of_what_it_yields():
    from dycl.rewriter.generators import generator_as_list

    locations = LocationTable()
    definition = generator_as_list(parse_function(Pyramid._features, locations).definition, locations)
    text = locations.strip(cst.Module(body=list(definition.body.body)).code).strip() + "\n"
    assert text == golden("""
        yielded_1 = []
        for stage in self.stages:
            x = stage(x)
            if x.mean() > 0:
                return yielded_1
            yielded_1.append(x)
        yielded_1.extend([x, x * 2])
        return yielded_1
    """)


class SendTarget(nn.Module):
    def _gen(self, x):
        scale = yield x  # MARK
        yield x * scale

    def forward(self, x):
        return list(self._gen(x))


class ReturnsValue(nn.Module):
    def _gen(self, x):
        yield x
        return x.sum()  # MARK

    def forward(self, x):
        return list(self._gen(x))


@pytest.mark.parametrize(("model_class", "construct"), [
    (SendTarget, "a yield used as a value"),
    (ReturnsValue, "a generator that returns a value"),
])
def test_generators_a_list_cannot_stand_for_are_refused(model_class, construct):
    with pytest.raises(dycl.UnsupportedError, match=construct) as info:
        dycl.rewriter.rewrite(model_class())
    assert "MARK" in info.value.location.source_line()


def forward_all(fn, *args, **kwargs):
    return fn(*args, **kwargs) + len(args)


def test_packs_become_parameters_of_their_own_and_forwarded_calls_get_them():
    from dycl.rewriter.forwarding import Forwarded, specialise

    locations = LocationTable()
    definition = parse_function(forward_all, locations).definition
    forwarded = Forwarded("args", ("args_0", "args_1"), "kwargs", {"scale": "kwargs_scale"})
    specialised = specialise(definition, forwarded)
    text = locations.strip(cst.Module(body=[specialised]).code).strip() + "\n"
    assert text == golden("""
        def forward_all(fn, args_0, args_1, kwargs_scale):
            args = (args_0, args_1)
            kwargs = {'scale': kwargs_scale}
            return fn(args_0, args_1, scale=kwargs_scale) + len(args)
    """)
