"""Conditions copied by unrolling are told apart by their iteration (issue 31, point 3):
in the rewritten source, the host's comments, the coverage report and the picture."""

from __future__ import annotations

import inspect

import torch
import torch.nn as nn
from dycl.hcfg.draw import layout_json
from dycl.rewriter.locations import split_where

import dycl


class Layers(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x):
        for layer in self.layers:
            if x.sum() > 0:  # the line every unrolled condition shares
                x = layer(x)
        step = 0
        while step < 2:
            if x.mean() > 1:
                x = x / 2
            step += 1
        return x


LINE = inspect.getsource(Layers.forward).splitlines().index("            if x.sum() > 0:  # the line every "
                                                            "unrolled condition shares")
LINE += Layers.forward.__code__.co_firstlineno


def test_each_unrolled_condition_carries_its_iteration_everywhere():
    torch.manual_seed(0)
    model = Layers().eval()
    where = [f"test_unrolled_labels.py:{LINE} [layer=self.layers[{i}]]" for i in range(3)]
    source = str(dycl.rewrite(model))
    assert all(f"# {w}" in source for w in where)
    assert "[iteration=0]" in source and "[iteration=1]" in source  # the while loop's iterations

    compiled = dycl.compile(model, torch.randn(1, 4))
    assert all(f"  # {w}" in compiled.host_source for w in where)
    report = dycl.check(model, compiled, [torch.randn(1, 4) * s for s in (0.1, 3.0, -3.0)], traced=False, repeat=0)
    assert [row["where"] for row in report.conditions][:3] == where
    assert len({row["where"] for row in report.conditions}) == len(report.conditions)
    conds = [n for n in layout_json(compiled.graph)["nodes"] if n["kind"] == "cond"]
    assert [(n["title"], n["where"]) for n in conds[:3]] == [(f"condition {i}", w) for i, w in enumerate(where)]


def test_split_where_separates_line_and_context():
    assert split_where("net.py:90 [g=0, blk=self.blocks[2]]") == ("net.py:90", "g=0, blk=self.blocks[2]")
    assert split_where("net.py:90") == ("net.py:90", "")


class Stages(nn.Module):
    """The condition sits in a helper called from the loop: inlined, it keeps the iteration."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])

    def _stage(self, x, block):
        if x.sum() > 0:
            return block(x)
        return x

    def forward(self, x):
        for block in self.blocks:
            x = self._stage(x, block)
        return x


def test_a_condition_inlined_from_a_helper_keeps_the_callers_iteration():
    source = str(dycl.rewrite(Stages().eval()))
    line = Stages._stage.__code__.co_firstlineno + 1
    for i in range(2):
        assert f"# test_unrolled_labels.py:{line} [block=self.blocks[{i}]]" in source, source
