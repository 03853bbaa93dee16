"""Every optimisation lever can be turned off on its own and the compiled model
still equals eager; each lever changes the HCFG or the artifact the way it says."""

from __future__ import annotations

import io

import pytest
import torch
import torch.nn as nn
from dycl.hcfg.levers import Levers

import dycl
from dycl.backends.onnx_cost import macs, runs_on_calling_thread
from dycl.harness.testing import assert_equivalent

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


# each lever shapes the host's sub-DNNs: measured on the host form (the one graph, which replaces
# them, has its own tests: tests/compile/test_single_graph.py); "default" is what compile does
SETTINGS = {
    "all on": Levers(single_graph="off"),
    "no merge into producers": Levers(merge_into_producers=False, single_graph="off"),
    # merging would fold the test's own sub-DNN back into the one before it
    "neither": Levers(conditions_in_producers=False, merge_into_producers=False, single_graph="off"),
    "no reuse": Levers(reuse_identical=False, single_graph="off"),
    "small graphs in the pool": Levers(small_graphs_on_caller=False, single_graph="off"),
    "default": Levers(),
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


def test_small_graphs_run_on_the_calling_thread_and_big_ones_in_the_pool(results, model, tmp_path):
    """GatedBlocks' sub-DNNs are a few 8x8 layers: every one is below the cost that pays for a
    pool (``onnx_cost.CALLING_THREAD_MACS``), so each runs on the calling thread; with the lever
    off the manifest leaves the choice to the load's setting. Saved and loaded, the host reads it."""
    on, off = results["all on"], results["small graphs in the pool"]
    assert {entry.threads for entry in on.manifest.sub_dnns.values()} == {1}
    assert {entry.threads for entry in off.manifest.sub_dnns.values()} == {None}
    loaded = dycl.load(on.save(tmp_path / "net"), threads=2)
    sessions = [executable.session for variants in loaded._host._variants.values() for executable in variants.values()]
    assert sessions and {s.get_session_options().intra_op_num_threads for s in sessions} == {1}
    assert assert_equivalent(model, loaded, _inputs(20), min_paths=2, atol=ATOL) >= 2


def test_the_cost_of_a_graph_counts_its_matrix_products_at_the_example_shapes():
    data = _onnx(nn.Sequential(nn.Linear(512, 512), nn.ReLU()), torch.randn(8, 512))
    assert macs(data, {"x": (8, 512)}) == 8 * 512 * 512
    assert macs(data, {"x": (1, 512)}) == 512 * 512
    assert runs_on_calling_thread(data, {"x": (1, 512)}) and not runs_on_calling_thread(data, {"x": (64, 512)})
    assert macs(data, {}) is None  # an input without a shape: unknown, so never the calling thread
    conv = _onnx(nn.Conv1d(4, 8, 3), torch.randn(2, 4, 10))
    assert macs(conv, {"x": (2, 4, 10)}) == 2 * 8 * 8 * (4 * 3)


def _onnx(module: nn.Module, example: torch.Tensor) -> bytes:
    buffer = io.BytesIO()
    torch.onnx.export(module.eval(), (example,), buffer, dynamo=False, input_names=["x"],
                      dynamic_axes={"x": {0: "batch"}})
    return buffer.getvalue()
