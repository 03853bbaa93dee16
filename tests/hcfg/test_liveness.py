"""Liveness on hand-built HCFGs: a chain, a diamond, exits, a variable live on one
branch only, dead code (strong liveness), host mutation, and the cache."""

from __future__ import annotations

import torch
from dycl.hcfg.annotate import annotate
from dycl.hcfg.liveness import Liveness, live_after_conditions

from tests.hcfg.graphs import cond, graph, host, ret, run, sub


def test_a_chain_passes_each_value_to_the_next_sub_dnn():
    hcfg = annotate(graph(("x",), sub(0, "h = x * 2"), host("k = 3"), sub(1, "y = h + k"), ret("y")))
    first, second = hcfg.sub_dnns
    assert (first.inputs, first.outputs) == (("x",), ("h",))
    assert (second.inputs, second.outputs) == (("h", "k"), ("y",))
    assert hcfg.liveness.live_before(second) == {"h", "k"}
    assert hcfg.liveness.live_after(second) == {"y"}


def diamond():
    return annotate(graph(
        ("x", "n"),
        sub(0, "a = x + 1", "b = x * 2"),
        cond(0, "n > 0", then=(sub(1, "y = a * 3"),), orelse=(sub(2, "y = x - 1"),)),
        ret("y")))


def test_a_variable_read_on_one_branch_is_live_on_that_branch_only():
    hcfg = diamond()
    first, then, orelse = hcfg.sub_dnns
    liveness = hcfg.liveness
    assert liveness.live_before(then) == {"a"}
    assert liveness.live_before(orelse) == {"x"}
    assert liveness.live_after(first) == {"a", "x", "n"}  # the test and both branches
    assert (first.inputs, first.outputs) == (("x",), ("a",))
    assert len(first.statements) == 1  # b = x * 2 is read nowhere: dropped
    assert then.outputs == orelse.outputs == ("y",)


def test_the_diamond_still_computes_what_it_did_on_both_paths():
    before = graph(("x", "n"), sub(0, "a = x + 1", "b = x * 2"),
                   cond(0, "n > 0", then=(sub(1, "y = a * 3"),), orelse=(sub(2, "y = x - 1"),)), ret("y"))
    after = annotate(before)
    paths = set()
    for n in (-2, 0, 3):
        x = torch.randn(2, 3)
        (expected, path), (got, _) = run(before, x=x, n=n), run(after, x=x, n=n)
        assert torch.equal(expected, got)
        paths.add(tuple(path))
    assert len(paths) == 2


def test_exits_end_liveness_and_what_only_the_exit_reads_is_not_live_after_it():
    hcfg = annotate(graph(
        ("x", "n"),
        sub(0, "a = x + 1", "c = x * 4"),
        cond(0, "n > 0", then=(ret("a"),), orelse=(host("n = n - 1"),)),
        sub(1, "y = c * n"),
        ret("y")))
    exit_, = [n for n in hcfg.body[1].then]
    liveness = hcfg.liveness
    assert liveness.live_before(exit_) == {"a"} and liveness.live_after(exit_) == {"c", "n"}
    assert liveness.live_after(hcfg.body[1]) == {"c", "n"}  # a is read only on the path that returned
    assert hcfg.sub_dnns[0].outputs == ("a", "c")


def test_dead_code_is_strongly_dead_and_an_empty_condition_goes():
    hcfg = annotate(graph(
        ("x", "n"),
        sub(0, "t = x + 1", "u = t * 2"),  # u is read only by a dead statement: both go
        cond(0, "n > 0", then=(sub(1, "v = u - 1"),)),  # nothing reads v: the whole condition goes
        sub(2, "y = x * 3"),
        ret("y")))
    assert [s.index for s in hcfg.sub_dnns] == [2] and not hcfg.conditions
    assert hcfg.liveness.live_before(hcfg.body[0]) == {"x"}  # n is no longer read


def test_a_host_method_call_reads_the_list_it_updates():
    hcfg = annotate(graph(("x",), host("outs = []"), sub(0, "h = x * 2"), host("outs.append(h)"),
                          sub(1, "y = torch.stack(outs)"), ret("y")))
    assert hcfg.sub_dnns[1].inputs == ("outs",)
    assert "outs" in hcfg.liveness.live_before(hcfg.body[1])  # across sub-DNN 0, which does not touch it
    assert hcfg.sub_dnns[0].outputs == ("h",)


def test_the_analysis_is_cached_per_graph_and_a_new_graph_gets_its_own():
    hcfg = diamond()
    assert hcfg.liveness is hcfg.liveness
    changed = hcfg.with_body(hcfg.body[:1] + (ret("a"),))
    assert changed.liveness is not hcfg.liveness
    assert changed.liveness.live_after(changed.body[0]) == {"a"}
    assert hcfg.liveness.live_after(hcfg.body[0]) == {"a", "x", "n"}


def test_live_after_conditions_is_the_graph_analysis():
    hcfg = diamond()
    condition = hcfg.conditions[0]
    assert live_after_conditions(hcfg.body, hcfg.locals)[id(condition)] == hcfg.liveness.live_after(condition) \
        == {"y"}
    assert Liveness.of(hcfg.body, hcfg.locals).after == hcfg.liveness.after
