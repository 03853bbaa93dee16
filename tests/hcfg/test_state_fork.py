"""``PathState.fork``: each path gets its own containers, and names that share one keep sharing it."""

from dycl.hcfg.state import PathState


def test_a_fork_keeps_aliases_and_leaves_the_original_alone():
    cfg = {"a": 5}
    items = [1]
    path = PathState({"cfg": cfg, "opts": cfg, "items": items, "n": 3})
    forked = path.fork()
    assert forked.concrete["cfg"] is forked.concrete["opts"]  # opts = cfg stays one dict on the new path
    forked.concrete["cfg"].update({"d": 1})
    forked.concrete["items"].append(2)
    assert forked.concrete["opts"] == {"a": 5, "d": 1}
    assert cfg == {"a": 5} and items == [1]  # the original path is untouched
    assert forked.concrete["n"] == 3
