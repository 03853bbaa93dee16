"""``PathState.fork``: each path gets its own containers, and names that share one keep sharing it."""

import inspect

import pytest
import torch
from dycl.hcfg.state import PathState

import dycl
from dycl.harness.testing import assert_equivalent


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


class _Collects(torch.nn.Module):
    """Collects hidden states in a dict: one on one path, two on the other."""

    def __init__(self, written_through: bool) -> None:
        super().__init__()
        self.a, self.b, self.head = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)
        self.written_through = written_through

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        collected = {"hidden": []}
        h = self.a(x)
        collected["hidden"].append(h)
        if h.mean() > 0:
            h = self.b(h)
            collected["hidden"].append(h)
        if self.written_through:
            collected["last"] = h  # a dict written through stays a dict (rewriter.dict_displays)
            h = collected["last"]  # MARK: the first read after the paths join
        return self.head(collected["hidden"][0]) + self.head(h)


def test_a_dict_of_lists_of_another_length_on_each_path_compiles_or_is_refused_at_its_read():
    """The dict reaches the return with a list of 1 on one path and of 2 on the other. Read only
    by key, it becomes one variable per key and the list gets a variant per length: compiled,
    both paths agree. Written through, it stays a dict, whose nested structure must agree across
    paths (``hcfg.variants``): refused at the read. Before the fork copied nested containers,
    exploration saw the append on both paths and the compiled model raised on the other one."""
    torch.manual_seed(0)
    model = _Collects(written_through=False).eval()
    compiled = dycl.compile(model, (torch.randn(2, 4),))
    inputs = [torch.randn(2, 4) * (1 + i % 3) for i in range(16)]
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5) == 2
    with pytest.raises(dycl.UnsupportedError, match="structure") as info:
        dycl.compile(_Collects(written_through=True).eval(), (torch.randn(2, 4),))
    lines, first = inspect.getsourcelines(_Collects.forward)
    mark = first + next(i for i, line in enumerate(lines) if "# MARK" in line)
    assert info.value.location is not None and info.value.location.line == mark
