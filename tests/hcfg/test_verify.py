"""``HCFG.check()`` (``hcfg.verify``): each invariant, broken on a small hand-built
graph, is caught with the invariant and the node (with its file:line) named;
graph passes check what they return when checking is on."""

from __future__ import annotations

from dataclasses import replace

import pytest
from dycl.hcfg.annotate import annotate
from dycl.hcfg.passes import checking, checks_enabled, graph_pass
from dycl.hcfg.verify import HCFGInvariantError

from tests.hcfg.graphs import cond, diamond, graph, host, ret, sub


def broken(invariant: str, where: str, hcfg) -> HCFGInvariantError:
    with pytest.raises(HCFGInvariantError) as caught:
        hcfg.check()
    assert caught.value.invariant == invariant, str(caught.value)
    assert where in str(caught.value) and "forward" in str(caught.value)
    return caught.value


def test_a_well_formed_diamond_passes():
    hcfg = diamond()
    hcfg.check()
    assert [s.inputs for s in hcfg.sub_dnns] == [("x",), ("a",), ("x",)]


def test_a_block_that_holds_something_else_is_caught():
    hcfg = diamond()
    broken("node-kind", "a str object", hcfg.with_body((*hcfg.body[:2], "return y")))
    broken("node-kind", "a block is a list", hcfg.with_body(list(hcfg.body)))
    empty = replace(hcfg.body[0], statements=())
    broken("node-kind", "sub-DNN 0", hcfg.with_body((empty, *hcfg.body[1:])))


def test_a_node_used_twice_is_caught():
    hcfg = diamond()
    shared = hcfg.body[1].then[0]
    twice = replace(hcfg.body[1], orelse=(shared,))
    broken("unique-node", "sub-DNN 1 (model.py:4)", hcfg.with_body((hcfg.body[0], twice, hcfg.body[2])))


def test_two_sub_dnns_with_one_index_are_caught():
    hcfg = diamond()
    clash = replace(hcfg.body[1], orelse=(replace(hcfg.body[1].orelse[0], index=1),))
    broken("unique-index", "sub-DNN 1 (model.py:6)", hcfg.with_body((hcfg.body[0], clash, hcfg.body[2])))


def test_two_conditions_with_one_index_are_caught():
    hcfg = graph(("n",), cond(0, "n > 0", then=(host("n = n + 1", at=3),), at=2),
                 cond(0, "n > 5", then=(host("n = n - 1", at=5),), at=4), ret("n", at=6))
    broken("unique-index", "condition 0 `if n > 5` (model.py:4)", hcfg)


def test_repeated_parameters_are_caught():
    hcfg = diamond()
    broken("unique-parameter", "parameters ['x', 'x']", replace(hcfg, parameters=("x", "x")))


def test_a_node_after_a_return_is_caught():
    hcfg = diamond()
    broken("reachable", "host operation `y = 0` (model.py:8)",
           hcfg.with_body((*hcfg.body, host("y = 0", at=8))))


def test_a_node_after_a_condition_whose_branches_both_return_is_caught():
    hcfg = annotate(graph(("n",), cond(0, "n > 0", then=(ret("1", at=3),), orelse=(ret("2", at=5),), at=2)))
    hcfg.check()
    broken("reachable", "return `n` (model.py:6)", hcfg.with_body((*hcfg.body, ret("n", at=6))))


def test_a_read_not_assigned_on_every_path_is_caught():
    hcfg = graph(("x", "n"), cond(0, "n > 0", then=(sub(0, "y = x * 2", at=3),), at=2), ret("y", at=4))
    error = broken("defined-before-use", "return `y` (model.py:4)", hcfg)
    assert "['y']" in str(error)


def test_a_condition_that_reads_an_unassigned_variable_is_caught():
    hcfg = graph(("x",), cond(0, "k > 0", then=(host("x = x + 1", at=3),), at=2), ret("x", at=4))
    hcfg = replace(annotate(hcfg), locals=hcfg.locals | {"k"})
    broken("defined-before-use", "condition 0 `if k > 0` (model.py:2)", hcfg)


def test_dead_code_is_caught():
    live = replace(diamond(), locals=diamond().locals | {"b", "c"})
    dead_statement = replace(live.body[0], statements=(*live.body[0].statements, *sub(9, "b = x * 5", at=9).statements))
    broken("no-dead-code", "`b = x * 5`", live.with_body((dead_statement, *live.body[1:])))
    dead_node = sub(7, "c = x - 2", at=9)
    broken("no-dead-code", "sub-DNN 7 (model.py:9)", live.with_body((dead_node, *live.body)))


def test_ports_that_disagree_with_liveness_are_caught():
    hcfg = diamond()
    stale = replace(hcfg.body[0], outputs=())
    error = broken("ports", "sub-DNN 0 (model.py:2)", hcfg.with_body((stale, *hcfg.body[1:])))
    assert "outputs []" in str(error) and "outputs ['a']" in str(error)


def test_a_graph_pass_checks_its_result_when_checking_is_on(monkeypatch):
    @graph_pass
    def drop_ports(hcfg):
        return hcfg.with_body((replace(hcfg.body[0], inputs=()), *hcfg.body[1:])), "extra"

    with checking(True):
        assert checks_enabled()
        with pytest.raises(HCFGInvariantError, match="after drop_ports breaks invariant 'ports' at sub-DNN 0"):
            drop_ports(diamond())
    with checking(False):
        assert drop_ports(diamond())[1] == "extra"
    monkeypatch.setenv("DYCL_CHECK", "0")
    assert not checks_enabled()
    drop_ports(diamond())
    monkeypatch.setenv("DYCL_CHECK", "1")
    with pytest.raises(HCFGInvariantError):
        drop_ports(diamond())


def test_a_graph_pass_must_return_a_graph():
    @graph_pass
    def wrong(hcfg):
        return None

    with checking(True), pytest.raises(TypeError, match="wrong returned NoneType"):
        wrong(diamond())


def test_the_suite_runs_with_checking_on():
    assert checks_enabled()  # tests/conftest.py
