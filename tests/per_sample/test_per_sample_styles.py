"""Per-sample batches of models written as people write early exits and skip gates
(``tests/per_sample/styles.py``): an entropy exit in a ``zip`` loop, a residual gate read with
``.item()`` that counts the blocks it ran, an adaptive-computation ``while`` loop summing a
Python float. Each batch mixes at least three eager paths; the batched result equals eager
run sample by sample, in process (predicated and routed where if-conversion applies) and
through the saved torch-free host."""

from __future__ import annotations

import pytest
import torch
from dycl.hcfg.levers import Levers

import dycl
from dycl.per_sample.testing import assert_per_sample, diverse, paths_of, saved_host_report
from tests.per_sample import styles

ATOL = 1e-5
pytestmark = pytest.mark.filterwarnings("ignore")


def _inputs(shape: tuple[int, ...], count: int = 48) -> list[torch.Tensor]:
    return [torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * (0.5 + seed % 4)
            for seed in range(count)]


def _check(model: torch.nn.Module, inputs: list[torch.Tensor], paths: int, tmp_path, **options) -> None:
    """The batch of 16 over every path equals eager per sample, in process and saved."""
    compiled = dycl.compile(model, inputs[0], per_sample=True, progress=False, **options)
    taken = paths_of(model, inputs)
    chosen = [inputs[i] for i in diverse(taken, 16)]
    assert assert_per_sample(model, compiled, chosen, min_paths=3, atol=ATOL) == paths
    artifact = compiled.save(tmp_path / "artifact")
    report = saved_host_report(artifact, model, inputs, inputs[1], atol=ATOL)
    assert report == {"checked": 2, "problems": [], "torch_loaded": False}


@pytest.mark.parametrize("predicate", [True, False], ids=["default", "routed"])
def test_entropy_exits_in_a_zip_loop(predicate, tmp_path):
    model = styles.EntropyExitCNN().eval()
    _check(model, _inputs((1, 3, 16, 16)), 3, tmp_path, optimize=Levers(predicate=predicate))


def test_residual_gates_read_with_item_count_the_blocks_run(tmp_path):
    model = styles.GatedResidualCNN().eval()
    inputs = _inputs((1, 3, 12, 12))
    _check(model, inputs, 3, tmp_path)
    assert len({model(x)[1] for x in inputs}) == 3  # the per-sample counter takes three values


def test_an_adaptive_computation_loop_that_breaks(tmp_path):
    model = styles.PonderMLP().eval()
    inputs = _inputs((1, 6))
    _check(model, inputs, 4, tmp_path)
    # 4 paths: 2 or 3 steps, and 4 steps with the last test true or false
    assert sorted({model(x)[1] for x in inputs}) == [2, 3, 4]
