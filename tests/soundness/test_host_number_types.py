"""A Python number whose type depends on the path (``scale = 2`` on one branch, ``0.5`` on the other)
reaching one sub-DNN: one variant per type (``hcfg.variants.NUMBER_RANKS``), picked by the host by the
number's type, so no path's number is cast to another path's port dtype, and ``isinstance``/``type`` of
it inside the sub-DNN answer as in eager. Checked by default and
per sample, in process and as the torch-free host; numbers of another type inside a list or tuple are
refused at the user's line; the per-sample self-check searches for the branches its example misses."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import dycl
from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host
from dycl.harness.self_check_inputs import Derived
from dycl.harness.self_check_search import branch_search
from dycl.per_sample.testing import assert_per_sample, paths_of, saved_host_report

pytestmark = pytest.mark.filterwarnings("ignore")
ATOL = 1e-5


class MixedScale(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.out = nn.Linear(4, 2)

    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:
            scale = 2
        else:
            scale = 0.5
        return self.out(h) * scale


class Offset(nn.Module):
    """A flag that is a bool on one path and a count on the other."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))

    def forward(self, x):
        logits = self.body(x)
        bias = 3
        if logits.mean() > 0:
            bias = False
        return logits + bias


class CountTimesStep(nn.Module):
    """An int tensor times a number: int64 on the int path, float on the float path."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 6)

    def forward(self, x):
        h = self.proj(x)
        if h.mean() > 0:
            step = 0.25
        else:
            step = 3
        active = (h > 0).sum(dim=1)
        return active * step, h


class TypedFill(nn.Module):
    """The number's type asked inside the sub-DNN that reads it: a fill whose dtype follows it."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 6)

    def forward(self, x):
        h = self.proj(x)
        if h.mean() > 0:
            step = 3
        else:
            step = 0.25
        fill = torch.full_like(h, step, dtype=torch.int64 if isinstance(step, int) else h.dtype)
        return h * step + isinstance(step, int) * 0.5, fill, type(step) is float


class TypedThenRebound(nn.Module):
    """The type asked before the sub-DNN rebinds the name to a tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 6)

    def forward(self, x):
        h = self.proj(x)
        if h.mean() > 0:
            step = 3
        else:
            step = 0.25
        h = h + isinstance(step, int) * 1.0
        step = torch.tensor(step) * h.sum()
        return h + step


class Bounds(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.out = nn.Linear(4, 2)

    def forward(self, x):
        y = self.out(x)
        if y.sum() > 0:
            bounds = (-1, 1)
        else:
            bounds = (-0.5, 0.25)
        return y.clamp(*bounds)


def _inputs(count: int = 24) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(7)
    return [torch.randn(1, 4, generator=generator) * (0.2 + 3 * (i % 3)) for i in range(count)]


def _model(cls: type[nn.Module]) -> nn.Module:
    torch.manual_seed(3)
    return cls().eval()


@pytest.mark.parametrize("cls", [MixedScale, Offset, CountTimesStep, TypedFill, TypedThenRebound])
def test_a_number_of_either_type_agrees_in_process_and_as_host(cls, tmp_path):
    paths = assert_agrees_in_process_and_as_host(_model(cls), _inputs(), tmp_path, ATOL, min_paths=2)
    assert paths == 2


@pytest.mark.parametrize("cls", [MixedScale, Offset])
def test_a_number_of_either_type_agrees_per_sample(cls, tmp_path):
    model, inputs = _model(cls), _inputs()
    compiled = dycl.compile(model, inputs[0], per_sample=True, progress=False)
    assert assert_per_sample(model, compiled, inputs, min_paths=2, atol=ATOL) == 2
    for sample in inputs:  # each sample alone too: a batch of one takes the single-sample route
        assert_per_sample(model, compiled, [sample], atol=ATOL)
    report = saved_host_report(compiled.save(tmp_path / "artifact"), model, inputs, inputs[1], atol=ATOL)
    assert report == {"checked": 2, "problems": [], "torch_loaded": False}


def test_numbers_of_another_type_in_a_tuple_are_refused_at_the_users_line():
    model, inputs = _model(Bounds), _inputs()
    assert len(set(paths_of(model, inputs))) == 2
    for per_sample in (False, True):
        with pytest.raises(dycl.UnsupportedError, match=r"`bounds`.*holding int, int") as refused:
            dycl.compile(model, inputs[0], per_sample=per_sample, progress=False)
        assert "test_host_number_types.py" in str(refused.value) and "float(v)" in str(refused.value)


def test_the_per_sample_self_check_searches_for_the_branches_its_example_misses():
    model, inputs = _model(MixedScale), _inputs()
    compiled = dycl.compile(model, inputs[0], per_sample=True, progress=False)
    search = branch_search(compiled, None)
    assert search is not None and len(search.outcomes) == 2
    example = Derived("example", (inputs[0],), {})
    search.note(example)
    assert len(search.seen) == 1  # the example takes one outcome of the one condition
    found = list(search.candidates(example))
    assert found and search.seen == search.outcomes
