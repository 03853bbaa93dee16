"""Comprehensions over tensors whose elements are not tensors (``[c.size(1) for c in x.split(3, 1)]``)
stay host code (``hcfg.host_comprehensions``): the host iterates the rows of a tensor it holds, or a
list the sub-DNN computes, and reads only the elements' metadata, made portable to numpy arrays.
Compiled in process and through the torch-free host on inputs of several batch sizes and paths; a
comprehension that reads its element otherwise on the host is refused at the user's line."""

from __future__ import annotations

import libcst as cst
import pytest
import torch
import torch.nn as nn
from dycl.hcfg.host_comprehensions import foreign_use, rows_iterable

import dycl
from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host


class RowCountedNorm(nn.Module):
    """Rescales by the number of rows, counted the long way, when the activations are large."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(6, 6)

    def forward(self, x):
        h = self.encoder(x)
        rows = [r.shape[0] for r in h.unbind(0)]
        n_rows = len(rows)
        if h.abs().mean() > 0.5:
            h = h / n_rows
        return h, max(r.size(0) for r in h)


class GroupWidths(nn.Module):
    """Splits the features into groups and weights each group's mean by its share of the width."""

    def __init__(self, group: int = 4):
        super().__init__()
        self.group = group
        self.proj = nn.Linear(10, 10)

    def forward(self, x):
        groups = self.proj(x).split(self.group, dim=1)
        widths = [g.size(1) for g in groups]
        total = sum(g.numel() for g in groups) // x.shape[0]
        out = torch.stack([g.mean(1) * (w / total) for g, w in zip(groups, widths)], dim=1)
        if out.max() > 0.2:
            out = out.softmax(-1)
        return out, len(widths)


class DtypeNames(nn.Module):
    def forward(self, x):
        kinds = [str(r.dtype) for r in x.unbind(0)]
        return x * len(kinds)


def _inputs(width: int, seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, width, generator=generator) * scale
            for batch in (2, 1, 3, 6) for scale in (0.2, 1.0, 3.0) for _ in range(4)]


def test_metadata_of_each_row(tmp_path):
    assert assert_agrees_in_process_and_as_host(RowCountedNorm(), _inputs(6, 1), tmp_path, 1e-5, min_paths=2) >= 2


def test_widths_of_split_groups(tmp_path):
    assert assert_agrees_in_process_and_as_host(GroupWidths(), _inputs(10, 2), tmp_path, 1e-5, min_paths=2) >= 2


def test_another_read_of_the_element_is_refused_at_its_line():
    with pytest.raises(dycl.UnsupportedError, match=r"reads its element other than by its shape .*test_host_comp"):
        dycl.compile(DtypeNames().eval(), torch.randn(2, 3))


def _comp(code: str):
    return cst.parse_expression(code)


@pytest.mark.parametrize(("before", "after"), [
    ("[r.shape[0] for r in x.unbind(0)]", "x"), ("[r for r in h.unbind()]", "h"),
    ("[r for r in h.unbind(dim=0)]", "h"), ("[r for r in h.unbind(1)]", "h.unbind(1)"),
    ("[c for c in x.split(2)]", "x.split(2)"),
])
def test_rows_iterable_golden(before: str, after: str):
    assert cst.Module([]).code_for_node(rows_iterable(_comp(before).for_in.iter)) == after


@pytest.mark.parametrize(("code", "foreign"), [
    ("[r.shape[0] for r in rows]", None), ("[len(r) + r.ndim for r in rows if r.numel() > 2]", None),
    ("(r.size(1) for r in rows)", None), ("[r.dtype for r in rows]", "r"), ("[f(r) for r in rows]", "r"),
    ("[r.shape for r in rows for c in r]", "for c in r"), ("{r.dim(): r.shape for r in rows}", None),
    ("{i: r.dim() for i, r in pairs}", "i"),
])
def test_foreign_use_golden(code: str, foreign: str | None):
    found = foreign_use(_comp(code))
    assert (None if found is None else cst.Module([]).code_for_node(found).strip()) == foreign
