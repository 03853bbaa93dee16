"""Every optimisation lever can be turned off on its own and the compiled model
still equals eager; each lever changes the HCFG or the artifact the way it says."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from dycl.hcfg.levers import Levers

import dycl
from dycl.testing import assert_equivalent

ATOL = 1e-5


class GatedBlocks(nn.Module):
    """Three uses of one residual block, each skipped when its gate says so (the
    test's tensor part, ``self.gate(x).mean()``, is hoisted into a sub-DNN); a
    counter kept by the host between the blocks."""

    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Sequential(nn.Linear(8, 8), nn.Tanh())
        self.gate = nn.Linear(8, 1)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        skipped = 0
        for _ in range(3):
            if self.gate(x).mean() > 0.0:
                x = x + self.block(x)
            else:
                skipped += 1
            x = x * 0.9
        return self.head(x), skipped


def _inputs(count: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return [torch.randn(1, 8, generator=generator) * 2 for _ in range(count)]


@pytest.fixture(scope="module")
def model() -> GatedBlocks:
    torch.manual_seed(0)
    return GatedBlocks().eval()


SETTINGS = {
    "all on": Levers(),
    "no merge into producers": Levers(merge_into_producers=False),
    # merging would fold the test's own sub-DNN back into the one before it
    "neither": Levers(conditions_in_producers=False, merge_into_producers=False),
    "no reuse": Levers(reuse_identical=False),
}


@pytest.fixture(scope="module")
def results(model):
    example = _inputs(1)[0]
    return {name: dycl.compile(model, example, optimize=levers) for name, levers in SETTINGS.items()}


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_each_lever_off_still_equals_eager_on_every_path(model, results, setting):
    paths = assert_equivalent(model, results[setting], _inputs(40), min_paths=4, atol=ATOL)
    assert paths >= 4


def test_conditions_in_producers_saves_a_sub_dnn_per_test_after_computation(results):
    merged, alone = results["no merge into producers"].stats, results["neither"].stats
    assert merged["conditions"] == alone["conditions"] == 3
    # the first test has no producer before it; the two others follow ``x = x * 0.9``
    assert alone["sub_dnns"] == merged["sub_dnns"] + 2


def _files(compiled) -> set[str]:
    return {entry.file for entry in compiled.manifest.sub_dnns.values()}


def test_reuse_compiles_identical_sub_dnns_once(results):
    on, off = results["all on"], results["no reuse"]
    assert on.stats["variants"] == off.stats["variants"]
    assert len(_files(off)) == off.stats["variants"]
    assert len(_files(on)) < len(_files(off))
