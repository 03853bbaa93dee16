"""The HCFG picture: branches side by side, T/F labels, joins, columns; Graphviz or matplotlib."""

from __future__ import annotations

import re

import matplotlib
import pytest
import torch
from dycl.hcfg.draw import dot_program, figure, layout_json, render, to_dot

import dycl
from models import blockdrop
from tests.dycl.test_coverage import TwoGates


@pytest.fixture(scope="module")
def blockdrop_picture():
    model, example = blockdrop.build()
    return layout_json(dycl.compile(model, example, backend="torch").graph)


def _extent(data):
    nodes = data["nodes"]
    return (max(n["x"] for n in nodes) + 1) * 3.6, (max(n["y"] for n in nodes) + 1) * 0.75


def test_blockdrop_layout_is_at_least_half_as_wide_as_tall(blockdrop_picture):
    width, height = _extent(blockdrop_picture)
    assert width / height >= 0.5 and blockdrop_picture["columns"] >= 3
    kinds = {n["kind"] for n in blockdrop_picture["nodes"]}
    assert kinds == {"sub_dnn", "cond", "host", "return", "join"}
    tags = [tag for _, _, tag in blockdrop_picture["edges"]]
    assert tags.count("T") == tags.count("F") == 54  # one of each per condition
    sub = next(n for n in blockdrop_picture["nodes"] if n["title"] == "subdnn_2")
    assert re.fullmatch(r"blockdrop\.py:\d+", sub["where"]) and sub["lines"][0].startswith("1 stmt: relu")


class EitherWay(torch.nn.Module):
    """A gate whose branches both compute: neither branch is a bare join."""

    def __init__(self):
        super().__init__()
        self.up, self.down, self.head = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)

    def forward(self, x):
        if x.mean() > 0:
            h = torch.relu(self.up(x))
        else:
            h = torch.tanh(self.down(x))
        return self.head(h)


def _branches(data):
    """(condition, then node, else node) for every condition of a layout."""
    nodes = {n["id"]: n for n in data["nodes"]}
    for cond in (n for n in data["nodes"] if n["kind"] == "cond"):
        then = next(nodes[b] for a, b, tag in data["edges"] if a == cond["id"] and tag == "T")
        orelse = next(nodes[b] for a, b, tag in data["edges"] if a == cond["id"] and tag == "F")
        yield cond, then, orelse


def test_two_computing_branches_are_side_by_side():
    torch.manual_seed(0)
    data = layout_json(dycl.compile(EitherWay().eval(), torch.randn(1, 4), backend="torch").graph)
    (cond, then, orelse), = _branches(data)
    assert then["kind"] != "join" and orelse["kind"] != "join"
    assert then["y"] == orelse["y"] > cond["y"]
    assert orelse["x"] > then["x"]


def test_branches_meet_at_a_join():
    torch.manual_seed(0)
    graph = dycl.compile(TwoGates().eval(), torch.randn(1, 4), backend="torch").graph
    data = layout_json(graph)
    for cond, then, orelse in _branches(data):  # each gate skips its block when false
        assert then["kind"] != "join" and orelse["kind"] == "join" and orelse["y"] > then["y"]
    joins = [n for n in data["nodes"] if n["kind"] == "join" and n["id"] != 0]
    assert len(joins) == 3  # where each of the three conditions' branches meet
    dot = to_dot(data)
    assert dot.count('label=" T "') == dot.count('label=" F "') == 3


@pytest.mark.skipif(dot_program() is None, reason="no Graphviz dot program (pip install graphviz-pure)")
def test_graphviz_svg_of_blockdrop_is_wide_enough(blockdrop_picture, tmp_path):
    assert render(blockdrop_picture, tmp_path / "bd.svg", "graphviz") == "graphviz"
    svg = (tmp_path / "bd.svg").read_text()
    width, height = (float(v) for v in re.search(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"', svg).groups())
    assert width / height >= 0.5
    assert len(re.findall(r">\s*T\s*<", svg)) == len(re.findall(r">\s*F\s*<", svg)) == 54


def test_matplotlib_fallback_leaves_the_backend_alone(tmp_path):
    torch.manual_seed(0)
    data = layout_json(dycl.compile(TwoGates().eval(), torch.randn(1, 4), backend="torch").graph)
    before = matplotlib.get_backend()
    assert render(data, tmp_path / "g.png", "matplotlib") == "matplotlib"
    assert render(data, tmp_path / "g.svg", "matplotlib") == "matplotlib"
    assert matplotlib.get_backend() == before
    assert (tmp_path / "g.png").read_bytes()[:4] == b"\x89PNG" and "<svg" in (tmp_path / "g.svg").read_text()
    assert type(figure(data)).__name__ == "Figure"
