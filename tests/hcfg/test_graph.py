"""The graph's own helpers on hand-built HCFGs: walking, exits, and its Graphviz outline."""

from __future__ import annotations

from dycl.hcfg.annotate import annotate
from dycl.hcfg.graph import always_returns, walk

from tests.hcfg.graphs import cond, graph, host, ret, sub


def test_walk_is_program_order_with_each_condition_before_its_branches():
    body = (sub(0, "a = x + 1"), cond(0, "n > 0", then=(host("n = 1"),), orelse=(sub(1, "a = x"),)), ret("a"))
    kinds = [type(node).__name__ + str(getattr(node, "index", "")) for node in walk(body)]
    assert kinds == ["SubDNN0", "Cond0", "HostOp", "SubDNN1", "Return"]


def test_a_block_always_returns_only_when_every_path_through_it_does():
    both = cond(0, "n > 0", then=(ret("1"),), orelse=(ret("2"),))
    one = cond(1, "n > 0", then=(ret("1"),))
    assert always_returns((both,)) and always_returns((host("n = 1"), ret("n")))
    assert not always_returns((one,)) and not always_returns((host("n = 1"),))


def test_the_outline_has_one_shape_per_node_and_a_final_return_none_only_when_a_path_falls_off():
    hcfg = annotate(graph(("x", "n"), sub(0, "a = x + 1"), cond(0, "n > 0", then=(ret("a"),)),
                          host("n = n + 1")))
    dot = hcfg.to_dot()
    assert dot.count("shape=box") == 1 and dot.count("shape=diamond") == 1 and dot.count("shape=plaintext") == 1
    assert dot.count("shape=oval") == 2  # return a, and the implicit return None
    ends = annotate(graph(("x",), sub(0, "a = x + 1"), ret("a"))).to_dot()
    assert "return None" not in ends
