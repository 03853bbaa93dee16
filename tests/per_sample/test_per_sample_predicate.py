"""If-conversion of per-sample conditions (``dycl.per_sample.predicate``): an early-exit
network becomes one sub-DNN that runs every branch on the whole group and selects each
sample's row, and gives every sample what eager gives it alone, like the routed form
(``optimize=Levers(predicate=False)``), in process and through the saved torch-free host.
Where a branch could fail on another sample's data or writes a value in place, the
conditions stay routed and the answers are still eager's."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F
from dycl.hcfg.graph import source_of
from dycl.hcfg.levers import Levers
from onnx import helper, numpy_helper
from torch import nn

import dycl
from dycl.per_sample.predicable_onnx import PredicationRefused, check_predicable
from dycl.per_sample.testing import assert_per_sample, diverse, paths_of, saved_host_report

ATOL = 1e-5
pytestmark = pytest.mark.filterwarnings("ignore")


class TwoExitNet(nn.Module):
    """An early-exit classifier as people write one: a cheap head that answers when it is
    sure, a deeper trunk otherwise, whose two exits reuse the name ``early``."""

    def __init__(self, classes: int = 5, width: int = 8) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width))
        self.act = nn.ReLU()
        self.early = nn.Linear(width, classes)
        self.trunk = nn.Sequential(nn.Conv2d(width, 2 * width, 3, stride=2, padding=1), nn.ReLU(),
                                   nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.late = nn.Linear(2 * width, classes)
        self.threshold = 0.28

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        features = self.stem(image)
        early = self.early(features.mean(dim=(2, 3)))
        confidence = F.softmax(early, dim=-1).max()
        if confidence > self.threshold:
            return early
        features = self.act(features)
        deep = self.trunk(features)
        if deep.abs().mean() > 0.2:
            early = self.late(deep) * 2  # the other exit reads the first head's `early`, not this one
            return early
        return self.late(deep) + early * 0.1


class LookupExit(nn.Module):
    """A branch that indexes a table by a value from the data: valid for the samples that take
    it, out of range for the others, so running it on the whole group could fail."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(6, 4)
        self.register_buffer("table", torch.randn(3, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x)
        level = h.mean()
        if level < 0.0:
            return h
        index = (level * 4).long()  # 0, 1 or 2 where it is used: level is below 0.75 there
        if level < 0.75:
            return h + self.table[index]
        return h * 2


class InPlaceBranch(nn.Module):
    """A branch that writes a value in place (``add_``): kept routed."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(6, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x)
        if h.sum() > 0:
            g = h * 3
            g.add_(1.0)
            return g
        return h - 1


def _images(count: int) -> list[torch.Tensor]:
    return [torch.randn(1, 3, 12, 12, generator=torch.Generator().manual_seed(s)) * (0.2 + s % 5) for s in range(count)]


def _vectors(count: int) -> list[torch.Tensor]:
    return [torch.randn(1, 6, generator=torch.Generator().manual_seed(100 + s)) * 1.5 for s in range(count)]


def _model(cls: type[nn.Module]) -> nn.Module:
    torch.manual_seed(0)
    return cls().eval()


@pytest.fixture(scope="module", params=["predicated", "routed"])
def two_exit(request, tmp_path_factory):
    model = _model(TwoExitNet)
    levers = Levers() if request.param == "predicated" else Levers(predicate=False)
    images = _images(48)
    compiled = dycl.compile(model, images[0], per_sample=True, progress=False, optimize=levers)
    artifact = compiled.save(tmp_path_factory.mktemp("artifact") / request.param)
    return request.param, model, compiled, images, artifact


def test_the_early_exits_are_predicated_or_routed_as_asked(two_exit):
    form, _, compiled, *_ = two_exit
    counts = compiled.stats["per_sample"]
    if form == "predicated":  # both conditions became selections in one sub-DNN
        assert (counts, compiled.stats["sub_dnns"]) == ({"predicated_conditions": 2, "routed_conditions": 0}, 1)
    else:
        assert (counts, compiled.stats["sub_dnns"]) == ({"predicated_conditions": 0, "routed_conditions": 2}, 4)


def test_a_batch_over_three_paths_equals_eager_per_sample(two_exit):
    _, model, compiled, images, _ = two_exit
    chosen = [images[i] for i in diverse(paths_of(model, images), 16)]
    assert assert_per_sample(model, compiled, chosen, min_paths=3, atol=ATOL) == 3
    assert assert_per_sample(model, compiled, images, min_paths=3, atol=ATOL) == 3  # all 48 in one batch


def test_the_saved_host_agrees_without_torch(two_exit):
    _, model, _, images, artifact = two_exit
    report = saved_host_report(artifact, model, images, images[7], atol=ATOL)
    assert report == {"checked": 2, "problems": [], "torch_loaded": False}


def test_a_branch_that_could_fail_on_other_samples_stays_routed(tmp_path):
    model = _model(LookupExit)
    vectors = _vectors(64)
    compiled = dycl.compile(model, vectors[0], per_sample=True, progress=False)
    # the table lookup is a Gather whose indices come from data: the compile started again routed
    counts = compiled.stats["per_sample"]
    assert (counts["predicated_conditions"], counts["routed_conditions"]) == (0, 2)
    assert "Gather with an operand computed from data" in counts["predication_declined"]
    assert assert_per_sample(model, compiled, vectors, min_paths=3, atol=ATOL) == 3
    report = saved_host_report(compiled.save(tmp_path / "lookup"), model, vectors, vectors[1], atol=ATOL)
    assert report == {"checked": 2, "problems": [], "torch_loaded": False}


def test_the_exported_graph_check_refuses_what_may_fail_on_other_rows():
    def graph(index_from_data: bool, op: str = "Gather", dtype: int = onnx.TensorProto.FLOAT) -> bytes:
        table = numpy_helper.from_array(np.ones((3, 4), np.float32), "table")
        nodes = [helper.make_node("Cast", ["x"], ["i"], to=onnx.TensorProto.INT64)] if index_from_data else \
            [helper.make_node("Constant", [], ["i"], value=numpy_helper.from_array(np.array(1, np.int64)))]
        nodes.append(helper.make_node(op, ["table", "i"], ["y"]) if op == "Gather" else
                     helper.make_node(op, ["x", "x"] if op == "Div" else ["x"], ["y"]))
        x = helper.make_tensor_value_info("x", dtype, [])
        y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT if op == "Gather" else dtype, None)
        return helper.make_model(helper.make_graph(nodes, "g", [x], [y], [table])).SerializeToString()

    check_predicable(graph(False), "a constant row")  # a Gather of a constant row runs on any data
    check_predicable(graph(False, "Div"), "a float division")
    for data, why in [(graph(True), "Gather with an operand computed from data"),
                      (graph(False, "Div", onnx.TensorProto.INT64), "integer Div"),
                      (graph(False, "NonZero"), "the op NonZero")]:
        with pytest.raises(PredicationRefused, match=why):
            check_predicable(data, "a test graph")


def test_a_network_whose_exits_save_more_than_their_runs_cost_stays_routed():
    torch.manual_seed(0)
    model = TwoExitNet(width=256).eval()  # about 43 M multiply-accumulates per sample, all exits converted
    images = _images(32)
    compiled = dycl.compile(model, images[0], per_sample=True, progress=False)
    counts = compiled.stats["per_sample"]
    assert (counts["predicated_conditions"], counts["routed_conditions"]) == (0, 2)
    assert "multiply-accumulates per sample" in counts["predication_declined"]
    assert assert_per_sample(model, compiled, images, min_paths=2, atol=ATOL) >= 2


def test_a_branch_that_writes_in_place_stays_routed():
    model = _model(InPlaceBranch)
    vectors = _vectors(32)
    compiled = dycl.compile(model, vectors[0], per_sample=True, progress=False)
    assert compiled.stats["per_sample"] == {"predicated_conditions": 0, "routed_conditions": 1}
    assert assert_per_sample(model, compiled, vectors, min_paths=2, atol=ATOL) == 2


def test_the_converted_sub_dnn_runs_both_branches_in_their_own_names(two_exit):
    form, _, compiled, *_ = two_exit
    if form == "routed":
        assert len(compiled.graph.sub_dnns) == 4 and "STRAIGHT = None" in compiled.host_source.splitlines()
        return
    (converted,) = compiled.graph.sub_dnns
    assert [source_of(statement.body[0]) for statement in converted.statements] == [
        "features = self.stem(image)",
        "early = self.early(features.mean(dim=(2, 3)))",
        "confidence = F.softmax(early, dim=-1).max()",
        "t = confidence > 0.28",
        # the first exit's branch is empty (it returns `early`); the other goes on in its own names
        "features_1 = self.act(features)",
        "deep_1 = self.trunk(features_1)",
        "t_1_1 = deep_1.abs().mean() > 0.2",
        "early_1_1 = self.late(deep_1) * 2",
        "t_2_1_1 = self.late(deep_1) + early * 0.1",  # reads the first head's `early`, not the one just written
        "_dycl_selected_1_1 = early_1_1.where(t_1_1, t_2_1_1)",
        "_dycl_selected_2 = early.where(t, _dycl_selected_1_1)",
    ]
    assert converted.outputs == ("_dycl_selected_2",)
    # the program is that one sub-DNN: the router runs it on the batch without a generator per sample
    assert "STRAIGHT = (0, ['image'])" in compiled.host_source.splitlines()
