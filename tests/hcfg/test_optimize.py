"""Constant hoisting and merging into producers on hand-built HCFGs: what moves,
what must not, and that the graph computes the same on every path afterwards."""

from __future__ import annotations

import libcst as cst
import pytest
import torch
from dycl.hcfg.annotate import annotate
from dycl.hcfg.graph import HostOp
from dycl.hcfg.optimize import CONSTANTS, hoist_constants, merge_into_producers
from dycl.hcfg.trace import Examples
from dycl.rewriter.errors import UnsupportedError

from tests.hcfg.graphs import cond, graph, host, ret, run, sub


def examples_of(hcfg, *calls: dict) -> dict[int, Examples]:
    """What ``hcfg.trace.explore`` records for ``hcfg`` on ``calls``: each sub-DNN's outputs."""
    outputs: dict[int, list] = {}
    for arguments in calls:
        run(hcfg, outputs=outputs, **arguments)
    return {index: Examples(outputs=values) for index, values in outputs.items()}


def _code(statement) -> str:
    return cst.Module([statement]).code


def gru_like():
    return annotate(graph(
        ("x", "n"),
        sub(0, "h = torch.zeros(2, 3)", "z = x * 2", "noise = torch.randn(2, 3)", at=2),
        cond(0, "n > 0", then=(sub(1, "y = z + h + noise * 0"),), orelse=(sub(2, "y = z - h"),), at=5),
        ret("y", at=8)))


def test_a_constant_output_is_hoisted_and_the_rest_stays():
    hcfg = gru_like()
    x = torch.randn(2, 3)
    hoisted, constants = hoist_constants(hcfg, examples_of(hcfg, {"x": x, "n": 1}, {"x": x, "n": -1}))
    assert list(constants) == ["h@0"] and torch.equal(constants["h@0"], torch.zeros(2, 3))
    first = hoisted.sub_dnns[0]
    assert first.outputs == ("noise", "z")  # random values are never constant; z reads the input
    assignment = hoisted.body[1]
    assert isinstance(assignment, HostOp) and "_constants['h@0']" in _code(assignment.statement)
    assert "model.py:2" in _code(assignment.statement)  # the line of the statement it replaces
    paths = set()
    for n in (-1, 1):
        x = torch.randn(2, 3)
        (expected, path), (got, _) = run(hcfg, x=x, n=n), run(hoisted, constants, x=x, n=n)
        assert torch.equal(expected, got)
        paths.add(tuple(path))
    assert len(paths) == 2


def test_a_model_variable_named_like_the_constants_table_is_refused_at_its_line():
    hcfg = annotate(graph(("x",), sub(0, "_constants = torch.ones(1)", "y = x + _constants", at=3), ret("y")))
    with pytest.raises(UnsupportedError, match=f"named '{CONSTANTS}'") as caught:
        hoist_constants(hcfg, examples_of(hcfg, {"x": torch.ones(1)}))
    assert caught.value.location is not None and caught.value.location.line == 3


def test_a_sub_dnn_moves_into_its_producer_across_host_code_that_cannot_tell():
    hcfg = annotate(graph(
        ("x", "n"),
        sub(0, "a = x + 1"),
        host("m = n + 1"),
        sub(1, "b = x * 2"),  # reads x only: nothing between touches it
        cond(0, "m > 2", then=(sub(2, "y = a + b"),), orelse=(sub(3, "y = a - b"),)),
        ret("y")))
    merged = merge_into_producers(hcfg)
    assert [s.index for s in merged.sub_dnns] == [0, 2, 3]
    assert merged.sub_dnns[0].outputs == ("a", "b")
    paths = set()
    for n in (0, 5):
        x = torch.randn(3)
        (expected, path), (got, _) = run(hcfg, x=x, n=n), run(merged, x=x, n=n)
        assert torch.equal(expected, got)
        paths.add(tuple(path))
    assert len(paths) == 2


@pytest.mark.parametrize(("between", "indices"), [
    (host("m = n * 2"), [0]),  # the control: nothing the sub-DNN reads or writes
    (host("k = n * 2"), [0, 1]),  # writes what the sub-DNN reads
    (host("outs.append(a)"), [0, 1]),  # changes the list the sub-DNN reads
    (cond(5, "n > 3", then=(ret("x"),)), [0, 1]),  # a path that leaves before the sub-DNN
], ids=["unrelated", "writes-an-input", "mutates-an-input", "may-return"])
def test_a_sub_dnn_does_not_move_across_what_could_tell(between, indices):
    hcfg = annotate(graph(
        ("x", "n"),
        host("outs = [x]"), host("k = n"),
        sub(0, "a = x + 1"),
        between,
        sub(1, "b = torch.stack(outs).sum() * k + a"),
        ret("b")))
    merged = merge_into_producers(hcfg)
    assert [s.index for s in merged.sub_dnns] == indices
    for n in (0, 5):
        x = torch.randn(3)
        assert torch.equal(run(hcfg, x=x, n=n)[0], run(merged, x=x, n=n)[0])


@pytest.mark.parametrize(("alias", "indices"), [
    ("view = outs", [0, 1]),  # view is outs: appending to it changes what the sub-DNN reads
    ("view = {'all': outs}", [0, 1]),  # outs inside view: view['all'].append(a) changes it
    ("view = [len(outs) * 2]", [0]),  # a new list of a number: nothing shared
], ids=["alias", "inside", "unrelated"])
def test_a_sub_dnn_does_not_move_across_a_write_through_an_alias(alias, indices):
    """Found by the fuzzer: ``s = self.stats; s["calls"] = ...`` then tensor code reading
    ``self.stats``; the write names ``s``, the read ``stats`` (``hcfg.host_aliases``)."""
    write = "view.append(a)" if alias == "view = outs" else (
        "view['all'].append(a)" if "all" in alias else "view.append(a)")
    hcfg = annotate(graph(
        ("x", "n"),
        host("outs = [x]"), host(alias),
        sub(0, "a = x + 1"),
        host(write),
        sub(1, "b = torch.stack(outs).sum() + a"),
        ret("b")))
    merged = merge_into_producers(hcfg)
    assert [s.index for s in merged.sub_dnns] == indices
    for n in (0, 5):
        x = torch.randn(3)
        (expected, _), (got, _) = run(hcfg, x=x, n=n), run(merged, x=x, n=n)
        assert torch.equal(expected, got)
