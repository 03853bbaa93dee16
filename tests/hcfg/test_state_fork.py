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


def test_containers_inside_containers_are_forked_too_and_keep_their_sharing():
    """A dict of lists appended to on one path only (``collected["hidden"].append(h)``): the other
    path must not see the append. Lists inside tuples too; one list reached two ways stays one."""
    hidden = [1]
    collected = {"hidden": hidden}
    pair = (hidden, 7)
    path = PathState({"collected": collected, "pair": pair, "hidden": hidden})
    forked = path.fork()
    forked.concrete["collected"]["hidden"].append(2)
    assert collected == {"hidden": [1]} and pair == ([1], 7)  # the original path is untouched
    assert forked.concrete["hidden"] == [1, 2] and forked.concrete["pair"][0] == [1, 2]  # one list, three ways
    assert path.fork().concrete["pair"] == ([1], 7)


def test_a_dict_of_lists_of_another_length_on_each_path_is_refused_at_its_read():
    """The same dict reaches the return with a list of 1 on one path and of 2 on the other: a
    nested structure must agree across paths (``hcfg.variants``), so the read is refused by
    name — it was a compiled model that raised on the path the example did not take."""
    import pytest
    import torch
    from torch import nn

    import dycl

    class Collects(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b, self.head = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            collected = {"hidden": []}
            h = self.a(x)
            collected["hidden"].append(h)
            if h.mean() > 0:
                h = self.b(h)
                collected["hidden"].append(h)
            return self.head(collected["hidden"][0]) + self.head(h)  # MARK

    torch.manual_seed(0)
    with pytest.raises(dycl.UnsupportedError, match="structure") as info:
        dycl.compile(Collects().eval(), (torch.randn(2, 4),))
    assert info.value.location is not None and info.value.location.line == Collects.forward.__code__.co_firstlineno + 7
