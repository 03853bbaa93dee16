"""``hcfg.interpreter.PathInterpreter`` and its explore subclass on hand-built HCFGs: every
node on every structurally different path, forks and merges at joins, paths ending at a
``return`` or a ``raise``, and the values each path returns, the example's own path among
them, equal to what the reference interpreter (``tests.hcfg.graphs.run``) computes."""

from __future__ import annotations

import torch
from dycl.hcfg.annotate import annotate
from dycl.hcfg.interpreter import PathInterpreter, Paths
from dycl.hcfg.state import PathFlags, PathState
from dycl.hcfg.trace import explore

from tests.hcfg.graphs import GLOBALS, cond, diamond, graph, host, ret, run, sub


class Recorder(PathInterpreter):
    """Runs nothing; writes down which node each visit saw and on how many states."""

    def __init__(self, hcfg) -> None:
        super().__init__(hcfg, Paths(PathFlags([], [c.test for c in hcfg.conditions], hcfg.parameters)))
        self.visits: list[tuple[str, int]] = []

    def run_sub_dnn(self, sub, states):
        self.visits.append((sub.name, len(states)))
        return states

    def run_host_op(self, op, states):
        self.visits.append(("host", len(states)))
        return states

    def run_raise(self, op, states):
        self.visits.append(("raise", len(states)))
        return []

    def entering(self, cond, states, outcome):
        self.visits.append((f"cond{cond.index}:{'T' if outcome else 'F'}", len(states)))
        return states

    def run_return(self, ret, states):
        self.visits.append(("return", len(states)))


def early_exit():
    """``h = x * 2; if h.sum() > 0: return h, 0``; else ``if n > 5: raise``; ``return h - 1, n``."""
    return annotate(graph(
        ("x", "n"),
        sub(0, "h = x * 2", "t = h.sum() > 0", at=2),
        cond(0, "t", then=(ret("(h, 0)", at=5),), at=4),
        cond(1, "n > 5", then=(host("raise ValueError('n too large')", at=7),), at=6),
        host("k = n + 1", at=8),
        ret("(h - 1, k)", at=9)))


def _explored(hcfg, **arguments):
    return explore(hcfg, GLOBALS, {"_constants": {}, **arguments})


def test_every_node_is_visited_in_program_order_and_a_join_merges_equal_states():
    interpreter = Recorder(diamond())
    after = interpreter.run([PathState({"x": torch.ones(2), "n": 1})])
    # both branches from one state; their states agree in signature at the join: one state returns
    assert interpreter.visits == [("subdnn_0", 1), ("cond0:T", 1), ("subdnn_1", 1), ("cond0:F", 1),
                                  ("subdnn_2", 1), ("return", 1)]
    assert after == []  # the only path returned


def test_a_path_ends_at_a_return_or_a_raise_and_the_rest_go_on():
    interpreter = Recorder(early_exit())
    interpreter.run([PathState({"x": torch.ones(2), "n": 1})])
    assert interpreter.visits == [("subdnn_0", 1), ("cond0:T", 1), ("return", 1), ("cond0:F", 1),
                                  ("cond1:T", 1), ("raise", 1), ("cond1:F", 1), ("host", 1), ("return", 1)]


def test_explore_records_every_return_and_marks_the_examples_own_path():
    hcfg = early_exit()
    calls = [{"x": torch.ones(3), "n": 2}, {"x": -torch.ones(3), "n": 2}, {"x": -torch.ones(3), "n": 1}]
    paths = set()
    for arguments in calls:
        found = _explored(hcfg, **arguments)
        # every path that does not raise ends at one of the two returns, whatever the example
        assert sorted(r.statement.body[0].value.elements[1].value.value for r in found.returns) == ["0", "k"]
        [example] = [r for r in found.returns if r.example]
        expected, path = run(hcfg, **arguments)
        paths.add(tuple(path))
        assert type(example.value) is tuple and len(example.value) == 2
        torch.testing.assert_close(example.value[0], expected[0])
        assert example.value[1] == expected[1]
        # the returned value is a copy: what the reference run computes, not the same objects
        assert example.value[0] is not expected[0]
    assert len(paths) == 2


def test_explore_gives_each_sub_dnn_its_examples_on_every_path():
    hcfg = diamond()
    found = _explored(hcfg, x=torch.ones(2, 3), n=1)
    assert {index: len(examples.inputs) for index, examples in found.examples.items()} == {0: 1, 1: 1, 2: 1}
    [returned] = found.returns  # the join merged the two paths (same signature)
    assert returned.example
    expected, path = run(hcfg, x=torch.ones(2, 3), n=1)
    assert path == ["sub0", "cond0:T", "sub1", "return"]
    torch.testing.assert_close(returned.value, expected)
    # the example takes the else-branch: its state was merged into the then-branch's, which stands for it
    found = _explored(hcfg, x=torch.ones(2, 3), n=0)
    [returned] = found.returns
    expected, path = run(hcfg, x=torch.ones(2, 3), n=0)
    assert path == ["sub0", "cond0:F", "sub2", "return"]
    assert returned.example and returned.value.shape == expected.shape and returned.value.dtype == expected.dtype


def test_the_example_path_is_lost_not_guessed_where_a_test_cannot_be_evaluated():
    hcfg = annotate(graph(
        ("x",),
        sub(0, "h = x * 2", at=2),
        cond(0, "undefined_name > 0", then=(ret("h", at=4),), orelse=(ret("h + 1", at=6),), at=3)))
    found = _explored(hcfg, x=torch.ones(2))
    assert len(found.returns) == 2 and not any(r.example for r in found.returns)


def test_the_examples_path_is_followed_past_a_join_inside_the_branch_it_did_not_take():
    """The inner join (``n > 0``) comes while the example's state waits in the outer then-branch."""
    hcfg = annotate(graph(
        ("x", "n"),
        sub(0, "h = x * 2", "t = h.sum() > 0", at=2),
        cond(0, "t", then=(sub(1, "y = h[:1]", at=5),),
             orelse=(cond(1, "n > 0", then=(sub(2, "y = h[:2]", at=7),), orelse=(sub(3, "y = h[:3]", at=9),),
                          at=6),), at=4),
        ret("y", at=10)))
    paths = set()
    for arguments in ({"x": torch.ones(4), "n": 1}, {"x": -torch.ones(4), "n": 1}, {"x": -torch.ones(4), "n": 0}):
        found = _explored(hcfg, **arguments)
        assert sorted(tuple(r.value.shape) for r in found.returns) == [(1,), (2,), (3,)]  # never merged: shapes differ
        [example] = [r for r in found.returns if r.example]
        expected, path = run(hcfg, **arguments)
        paths.add(tuple(path))
        torch.testing.assert_close(example.value, expected)
    assert len(paths) == 3
