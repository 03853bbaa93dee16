"""``hcfg.merge_renames.merge_across_renames`` on graphs built by hand: *sub-DNN, host
renames, sub-DNN* become one sub-DNN, the rest stays; every graph runs as before."""

from __future__ import annotations

import libcst as cst
import pytest
import torch
from dycl.hcfg.annotate import annotate
from dycl.hcfg.graph import HostOp, SubDNN
from dycl.hcfg.merge_renames import merge_across_renames

from tests.hcfg.graphs import cond, graph, host, ret, run, sub


def _same_on_every_path(before, after, calls) -> int:
    """Both graphs return equal values on ``calls``; the number of distinct paths of ``before``."""
    paths = set()
    for arguments in calls:
        (expected, path), (got, _) = run(before, **arguments), run(after, **arguments)
        assert torch.equal(expected, got), arguments
        paths.add(tuple(path))
    return len(paths)


def _calls():
    generator = torch.Generator().manual_seed(0)
    return [{"x": torch.randn(3, generator=generator) + shift, "n": n} for shift in (-2.0, 2.0) for n in (0, 5)]


def _body(node) -> list[str]:
    """Each node as one line: ``sub0: a = x + 1; r = a`` or the host statement."""
    def code(statement):
        return cst.Module([statement]).code.strip()
    if isinstance(node, SubDNN):
        return [f"sub{node.index}: " + "; ".join(code(s) for s in node.statements)]
    return [code(node.statement)] if isinstance(node, HostOp) else [type(node).__name__]


def residual():
    """``h = x * 2; residual = h; h = torch.relu(h) - 1 + residual; if h.sum() > n: ...``"""
    return annotate(graph(
        ("x", "n"),
        sub(0, "h = x * 2"),
        host("residual = h"),
        sub(1, "h = torch.relu(h) - 1 + residual", "t = h.sum() > n"),
        cond(0, "t", then=(sub(2, "y = h * 3"), ret("y"))),
        sub(3, "y = h - residual"),
        ret("y")))


def test_the_residual_pattern_becomes_one_sub_dnn():
    before = residual()
    after = merge_across_renames(before)
    assert [line for node in after.body for line in _body(node)] == [
        "sub0: h = x * 2; residual = h; h = torch.relu(h) - 1 + residual; t = h.sum() > n", "Cond",
        "sub3: y = h - residual", "Return"]
    assert after.sub_dnns[0].outputs == ("h", "residual", "t")
    assert _same_on_every_path(before, after, _calls()) == 2


def test_names_that_still_denote_one_object_keep_their_host_rename():
    """``kept = h`` is rebound by nothing after: the host still makes ``kept`` the very object ``h``."""
    before = annotate(graph(
        ("x", "n"),
        sub(0, "h = x + 1"),
        host("kept = h"),
        sub(1, "z = kept * 2 + h"),
        host("same = kept is h"),
        ret("z if same else z * 0")))
    after = merge_across_renames(before)
    assert [line for node in after.body for line in _body(node)] == [
        "sub0: h = x + 1; kept = h; z = kept * 2 + h", "kept = h", "same = kept is h", "Return"]
    assert "kept" not in after.sub_dnns[0].outputs  # the host assigns it again
    assert _same_on_every_path(before, after, _calls()) == 1


def test_a_chain_of_renames_and_a_second_merge():
    before = annotate(graph(
        ("x", "n"),
        sub(0, "a = x - 1"),
        host("b = a"), host("c = b"),
        sub(1, "a = c * 2"),
        host("d = a"),
        sub(2, "a = d + c"),
        cond(0, "n > 2", then=(ret("a"),)),
        ret("-a")))
    after = merge_across_renames(before)
    assert [s.index for s in after.sub_dnns] == [0]
    assert _same_on_every_path(before, after, _calls()) == 2


@pytest.mark.parametrize("between, consumer", [
    (host("r = n"), "y = h + 1"),  # renames a host value, not one the sub-DNN assigned
    (host("r = h + 0"), "y = h + r"),  # not a rename
    (host("r = h"), "h.add_(1)\ny = h + r"),  # the consumer writes in place: r would share it
    (host("r = h"), "h += 1\ny = h + r"),
    (host("r = h"), "torch.relu_(h)\ny = h + r"),
    (host("r = h"), "torch.add(h, 1, out=h)\ny = h + r"),
], ids=["host-value", "not-a-rename", "in-place-method", "augmented", "in-place-function", "out"])
def test_what_is_not_a_rename_of_a_sub_dnn_value_stays(between, consumer):
    before = annotate(graph(
        ("x", "n"),
        sub(0, "h = x * 2"),
        between,
        sub(1, *consumer.split("\n")),
        ret("y")))
    after = merge_across_renames(before)
    assert [s.index for s in after.sub_dnns] == [0, 1]
    _same_on_every_path(before, after, _calls())


def test_a_rename_into_a_branch_or_before_a_condition_stays():
    before = annotate(graph(
        ("x", "n"),
        sub(0, "h = x * 2", "t = h.sum() > 0"),
        host("r = h"),
        cond(0, "t", then=(sub(1, "y = r + 1"), ret("y"))),
        ret("h")))
    after = merge_across_renames(before)
    assert [s.index for s in after.sub_dnns] == [0, 1]
    assert _same_on_every_path(before, after, _calls()) == 2
