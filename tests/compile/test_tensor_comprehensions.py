"""A generator or comprehension over tensors inside an ``if`` test or a returned value
(``hcfg.host_comprehensions``): its elements are computed by the sub-DNN as a list and the
host reduces it (``any``, ``all``, ``sum``), in process and as the torch-free host; one the
host would have to decide element by element is refused at its line; a comprehension over
Python numbers stays host code as before."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn as nn

import dycl
from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host


class AnyRowHot(nn.Module):
    """Refines the batch when any row's activation is large."""

    def __init__(self):
        super().__init__()
        self.encode = nn.Linear(6, 6)
        self.refine = nn.Linear(6, 6)

    def forward(self, x):
        x = self.encode(x)
        if any(r.sum() > 1 for r in x.unbind(0)):
            return self.refine(x)
        return x * 2


class AllHeadsAgree(nn.Module):
    """Averages the heads when all are confident, else takes the first; also returns the norms."""

    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleList([nn.Linear(4, 3) for _ in range(3)])

    def forward(self, x):
        outs = [head(x).softmax(-1) for head in self.heads]
        if all(o.max(-1).values.min() > 0.4 for o in outs):
            y = torch.stack(outs).mean(0)
        else:
            y = outs[0]
        return y, [o.norm() for o in outs]


class HostNumbers(nn.Module):
    """A comprehension over Python numbers, in host code: left as it is."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        x = self.lin(x)
        if x.mean() > 0:
            return [x * i for i in range(3)]
        return [x - i for i in (1, 2)]


class StaticFilter(nn.Module):
    """A filter on shapes, not values: the comprehension moves to the sub-DNN whole."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        x = self.lin(x)
        pieces = (x, x.sum(-1), x * 3)
        if x.mean() > 0:
            return [p * 2 for p in pieces if p.dim() == 2]
        return [p - 1 for p in pieces if p.dim() == 1]


def _inputs(shape: tuple[int, ...], n: int, seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=generator) * (0.2 + 0.4 * (i % 8)) for i in range(n)]


def test_any_over_unbind_in_an_if(tmp_path):
    torch.manual_seed(0)
    with warnings.catch_warnings():  # unbind along the batch: compiled for that batch size (a warning says so)
        warnings.simplefilter("ignore")
        paths = assert_agrees_in_process_and_as_host(AnyRowHot(), _inputs((3, 6), 24, 1), tmp_path, atol=1e-5,
                                                     min_paths=2)
    assert paths >= 2


def test_all_over_a_list_of_heads_keeps_the_batch_symbolic(tmp_path):
    torch.manual_seed(4)
    inputs = _inputs((2, 4), 24, 2) + _inputs((5, 4), 8, 3)  # two batch sizes: the batch stays symbolic
    paths = assert_agrees_in_process_and_as_host(AllHeadsAgree(), inputs, tmp_path, atol=1e-5, min_paths=2)
    assert paths >= 2


def test_a_filter_on_shapes_moves_to_the_sub_dnn(tmp_path):
    torch.manual_seed(3)
    paths = assert_agrees_in_process_and_as_host(StaticFilter(), _inputs((2, 3), 24, 5), tmp_path, atol=1e-5,
                                                 min_paths=2)
    assert paths >= 2


def test_a_comprehension_over_numbers_stays_host_code(tmp_path):
    torch.manual_seed(1)
    paths = assert_agrees_in_process_and_as_host(HostNumbers(), _inputs((2, 3), 16, 4), tmp_path, atol=1e-5,
                                                 min_paths=2)
    assert paths >= 2


class ItemFilter(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        x = self.lin(x)
        if any(r.sum().item() > 0 for r in x.unbind(0)):
            return x + 1
        return x - 1


class DataFilter(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        x = self.lin(x)
        if any(r.max() > 1 for r in x.unbind(1) if r.mean() > 0):
            return x + 1
        return x - 1


@pytest.mark.parametrize("model", [ItemFilter, DataFilter])
def test_a_comprehension_the_host_would_decide_is_refused_at_its_line(model):
    with pytest.raises(dycl.UnsupportedError, match="comprehension over tensors") as info:
        dycl.compile(model().eval(), torch.randn(2, 4))
    assert info.value.location is not None and info.value.location.line == model.forward.__code__.co_firstlineno + 2
