"""The row-independence proof (``dycl.per_sample.row_independence``) on small graphs, and the
batched group model (``dycl.per_sample.group_onnx.group_model``) it allows: proven nodes
run once on the whole group, the rest per sample, and every row is what the
single-sample graph gives that row alone."""

from __future__ import annotations

import io

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper
from torch import nn

from dycl.export.static_fold import fold_static_shapes
from dycl.per_sample.group_onnx import group_model, scan_over_samples
from dycl.per_sample.row_independence import SAMPLE, analyse

pytestmark = pytest.mark.filterwarnings("ignore")
GROUP = 7


def _export(module: nn.Module, *example: torch.Tensor, training: bool = False) -> bytes:
    """The sub-DNN the way dycl exports it: one sample, static shapes, opset 17."""
    buffer = io.BytesIO()
    mode = torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL
    torch.onnx.export(module, example, buffer, dynamo=False, opset_version=17, training=mode,
                      do_constant_folding=not training)
    return buffer.getvalue()


def _scans(data: bytes) -> list[str]:
    return [node.name for node in onnx.load_model_from_string(data).graph.node if node.op_type == "Scan"]


def _rows_agree(data: bytes, *shapes: tuple, seed: int = 0) -> None:
    """The group model on ``GROUP`` random rows equals the single-sample graph row by row."""
    single = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    grouped = ort.InferenceSession(group_model(data), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(seed)
    names = [value.name for value in single.get_inputs()]
    feeds = {name: rng.normal(size=(GROUP, *shape)).astype(np.float32) for name, shape in zip(names, shapes)}
    together = grouped.run(None, feeds)
    for row in range(GROUP):
        alone = single.run(None, {name: value[row] for name, value in feeds.items()})
        for got, expected in zip(together, alone):
            assert got[row].shape == expected.shape and got[row].dtype == expected.dtype
            np.testing.assert_allclose(got[row], expected, atol=1e-5, rtol=1e-5)


class RowWiseCNN(nn.Module):
    """Conv, BatchNorm (eval), pooling, ``view(x.size(0), -1)``, Linear, softmax per row."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        x = x.view(x.size(0), -1)
        return F.softmax(self.fc(x), dim=1), x.mean(dim=1, keepdim=True)


def test_a_row_wise_cnn_is_batched_without_a_scan():
    data = _export(RowWiseCNN().eval(), torch.randn(1, 3, 8, 8))
    plan = analyse(onnx.load_model_from_string(data))
    assert plan.tail == [] and plan.first_refusal is None and len(plan.reshapes) == 1
    assert _scans(group_model(data)) == []
    _rows_agree(data, (1, 3, 8, 8))


class Attention(nn.Module):
    """Self-attention over a sequence, per sample: bmm, transpose, masked_fill, layer norm."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.qkv = nn.Linear(8, 24)
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(1, 2) / 8 ** 0.5
        mask = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(mask, float("-inf"))
        return self.norm(x + torch.softmax(scores, dim=-1) @ v)


def test_attention_over_a_sequence_is_batched():
    data = _export(Attention().eval(), torch.randn(1, 5, 8))
    single = onnx.load_model_from_string(data)
    assert "group size" in analyse(single).first_refusal  # chunk's Shape -> Slice, until folded
    assert analyse(fold_static_shapes(single)).tail == []
    assert _scans(group_model(data)) == []
    _rows_agree(data, (1, 5, 8))


class ExitHead(nn.Module):
    """A classifier head and its exit condition: ``max`` over the whole softmax."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(2)
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        logits = self.fc(torch.tanh(x))
        return logits, F.softmax(logits, dim=1).max() > 0.5


def test_a_condition_over_the_whole_tensor_is_reduced_row_by_row():
    """``softmax(...).max() > t`` reduces one sample's whole tensor: in the group, each row's
    own elements (the widened ReduceMax skips the group dim) and a scalar per sample."""
    data = _export(ExitHead().eval(), torch.randn(1, 6))
    single = onnx.load_model_from_string(data)
    plan = analyse(single)
    assert plan.tail == [] and plan.first_refusal is None
    (reduce_max,) = [i for i in plan.batched if single.graph.node[i].op_type == "ReduceMax"]
    assert plan.edits[reduce_max].axes == [1]  # the single graph reduces every axis; the row's are axis 1
    assert plan.classes[single.graph.output[1].name] == SAMPLE
    grouped = group_model(data)
    assert _scans(grouped) == []
    assert ort.InferenceSession(grouped, providers=["CPUExecutionProvider"]).get_outputs()[1].shape == ["samples"]
    _rows_agree(data, (1, 6))


class Mixing(nn.Module):
    """Statements that read or reduce across the whole tensor, as people write them."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how

    def forward(self, x):
        y = torch.sigmoid(x)
        if self.how == "view":
            return y.view(-1) * 2
        if self.how == "standardise":
            return (y - y.mean()) / (y.std() + 1e-5)
        if self.how == "sum":
            return y * y.sum()
        if self.how == "cumsum":
            return y.view(-1).cumsum(0)
        return torch.cat([y, y.flip(0)], dim=0).sum(0, keepdim=True)  # "flip"


@pytest.mark.parametrize("how", ["cumsum", "flip"])
def test_statements_that_mix_the_whole_tensor_stay_per_sample(how):
    data = _export(Mixing(how), torch.randn(1, 4))
    plan = analyse(onnx.load_model_from_string(data))
    assert plan.tail, plan.first_refusal
    _rows_agree(data, (1, 4))


@pytest.mark.parametrize("how", ["standardise", "sum", "view"])
def test_a_whole_tensor_statistic_applied_to_the_rows_is_batched(how):
    """``y * y.sum()``, ``(y - y.mean()) / y.std()``: each row meets its own statistic
    (a sample value lifted to ``(G, 1)``), never another row's; ``y.view(-1) * 2`` is
    each row flattened on its own, ``(G, 4)``."""
    data = _export(Mixing(how), torch.randn(1, 4))
    plan = analyse(fold_static_shapes(onnx.load_model_from_string(data)))
    assert plan.tail == [] and any(edit.lifts or edit.target for edit in plan.edits.values())
    assert _scans(group_model(data)) == []
    _rows_agree(data, (1, 4))


def test_batch_norm_in_training_mode_stays_per_sample():
    model = nn.Sequential(nn.Conv2d(2, 3, 1), nn.BatchNorm2d(3)).train()
    data = _export(model, torch.randn(1, 2, 4, 4), training=True)
    plan = analyse(onnx.load_model_from_string(data))
    assert "training mode" in plan.first_refusal


def _graph(nodes, inputs, outputs, initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _floats(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _constant(name, values, dtype=np.int64):
    return numpy_helper.from_array(np.array(values, dtype=dtype), name)


@pytest.mark.parametrize("node, initializers, out_shape, reason", [
    (helper.make_node("Shape", ["x"], ["y"]), [], [2], "group size"),
    (helper.make_node("Flatten", ["x"], ["y"], axis=0), [], [1, 6], "flattens dim 0"),
    (helper.make_node("Transpose", ["x"], ["y"], perm=[1, 0]), [], [6, 1], "moves dim 0"),
    (helper.make_node("Reshape", ["x", "s"], ["y"], allowzero=1), [_constant("s", [6])], [6], "target shape"),
    (helper.make_node("ReduceL1", ["x"], ["y"], axes=[0], keepdims=1), [], [1, 6], "dim 0 alone"),
    (helper.make_node("ReduceSumSquare", ["x"], ["y"], axes=[0], keepdims=0), [], [6], "dim 0 alone"),
    (helper.make_node("Concat", ["x", "x"], ["y"], axis=0), [], [2, 6], "dim 0"),
    (helper.make_node("Gather", ["x", "i"], ["y"], axis=0), [_constant("i", [0, 0])], [2, 6], "dim 0"),
    (helper.make_node("Gemm", ["x", "w"], ["y"], transA=1), [_constant("w", np.ones((1, 6)), np.float32)],
     [6, 6], "contracts over the rows"),
    (helper.make_node("Add", ["x", "c"], ["y"]), [_constant("c", np.ones((3, 6)), np.float32)], [3, 6],
     "dim 0 is not 1"),
    (helper.make_node("Softmax", ["x"], ["y"], axis=0), [], [1, 6], "dim 0"),
    (helper.make_node("Expand", ["x", "s"], ["y"]), [_constant("s", [4, 6])], [4, 6], "widens dim 0"),
    (helper.make_node("Unsqueeze", ["x", "a"], ["y"]), [_constant("a", [0])], [1, 1, 6], "before dim 0"),
    (helper.make_node("RandomNormalLike", ["x"], ["y"]), [], [1, 6], "deterministic"),
    (helper.make_node("Einsum", ["x"], ["y"], equation="ij->ji"), [], [6, 1], "no row rule"),
])
def test_nodes_that_mix_or_read_the_rows_are_refused(node, initializers, out_shape, reason):
    model = _graph([node], [_floats("x", [1, 6])], [_floats("y", out_shape)], initializers)
    plan = analyse(model)
    assert plan.batched == [] and plan.tail == [0] and reason in plan.first_refusal


def test_maxpool_indices_count_over_the_whole_batch():
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2])
    model = _graph([node], [_floats("x", [1, 1, 4, 4])],
                   [_floats("y", [1, 1, 2, 2]), helper.make_tensor_value_info("i", TensorProto.INT64, [1, 1, 2, 2])])
    assert "indices" in analyse(model).first_refusal


def test_a_shared_computation_and_a_tail_that_reads_it():
    """A value computed from weights alone is shared; the tail reads it from the outer scope."""
    nodes = [helper.make_node("Mul", ["w", "w"], ["w2"]), helper.make_node("ReduceSum", ["w2"], ["w2s"], keepdims=0),
             helper.make_node("MatMul", ["x", "w2"], ["h"]), helper.make_node("CumSum", ["h", "one"], ["m"]),
             helper.make_node("Add", ["m", "w2s"], ["y"])]
    model = _graph(nodes, [_floats("x", [1, 3])], [_floats("y", [1, 2]), _floats("h", [1, 2])],
                   [numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(3, 2) / 6, "w"),
                    _constant("one", 1)])
    plan = analyse(model)
    assert plan.batched == [0, 1, 2] and plan.tail == [3, 4]
    data = model.SerializeToString()
    assert _scans(group_model(data)) == ["per_sample_tail"]
    _rows_agree(data, (1, 3))


class Transposed(nn.Module):
    def forward(self, x):
        return torch.sigmoid(x.t()).cumsum(0)


def test_the_scanned_form_is_kept_where_nothing_is_proven():
    data = _export(Transposed(), torch.randn(1, 4))
    assert _scans(group_model(data)) == _scans(scan_over_samples(data)) == ["per_sample_scan"]


class WithToken(nn.Module):
    """A learned token joined to each sample's features (a class token, a start word)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        torch.manual_seed(5)
        self.token = nn.Parameter(torch.randn(1, 3))
        self.dim = dim

    def forward(self, x):
        return torch.cat([self.token, torch.tanh(x)], dim=self.dim) * 2


def test_a_shared_tensor_joined_to_rows_is_repeated_over_the_group():
    data = _export(WithToken(dim=1), torch.randn(1, 4))
    plan = analyse(onnx.load_model_from_string(data))
    assert plan.tail == [] and list(plan.expands.values()) == [[0]]
    assert _scans(group_model(data)) == []
    _rows_agree(data, (1, 4))


def test_a_shared_tensor_joined_along_dim_0_stays_per_sample():
    data = _export(WithToken(dim=0), torch.randn(1, 3))
    assert "along dim 0" in analyse(onnx.load_model_from_string(data)).first_refusal
    _rows_agree(data, (1, 3))


def test_a_sub_dnn_without_inputs_gives_one_row_for_every_sample():
    """Regression (per-sample fuzz, seed 3 program 13): no input, so no group to scan over."""
    value = numpy_helper.from_array(np.arange(3, dtype=np.float32).reshape(1, 3))
    model = _graph([helper.make_node("Constant", [], ["y"], value=value)], [], [_floats("y", [1, 3])])
    session = ort.InferenceSession(group_model(model.SerializeToString()), providers=["CPUExecutionProvider"])
    (rows,) = session.run(None, {})
    np.testing.assert_array_equal(rows, np.arange(3, dtype=np.float32).reshape(1, 1, 3))


def _scalar(name, value, dtype=np.int64):
    return numpy_helper.from_array(np.array(value, dtype=dtype), name)


def test_a_samples_own_row_and_its_elements_are_sample_values():
    """``policy[0]``, ``policy[0][2] > 0.5`` and ``x * policy[0][2]`` (BlockDrop's lookups):
    no row dim in the single graph, the group dim in front in the widened one."""
    nodes = [helper.make_node("Gather", ["x", "zero"], ["row"], axis=0),
             helper.make_node("Gather", ["row", "two"], ["element"], axis=0),
             helper.make_node("Greater", ["element", "half"], ["keep"]),
             helper.make_node("Mul", ["x", "element"], ["scaled"])]
    model = _graph(nodes, [_floats("x", [1, 6])],
                   [helper.make_tensor_value_info("keep", TensorProto.BOOL, []), _floats("scaled", [1, 6]),
                    _floats("row", [6])],
                   [_scalar("zero", 0), _scalar("two", 2), _scalar("half", 0.5, np.float32)])
    plan = analyse(model)
    assert plan.tail == []
    assert [plan.classes[name] for name in ("row", "element", "keep", "scaled")] == [SAMPLE, SAMPLE, SAMPLE, "rowed"]
    assert plan.edits[0].identity and plan.edits[1].axis == 1 and plan.edits[3].lifts == {1: 1}
    data = model.SerializeToString()
    assert _scans(group_model(data)) == []
    _rows_agree(data, (1, 6))


def test_a_squeezed_row_reduced_and_unsqueezed_again():
    nodes = [helper.make_node("Squeeze", ["x", "zero"], ["plane"]),
             helper.make_node("ReduceSum", ["plane", "one"], ["sums"], keepdims=0),
             helper.make_node("Unsqueeze", ["sums", "zero"], ["y"])]
    model = _graph(nodes, [_floats("x", [1, 2, 3])], [_floats("y", [1, 2])],
                   [_constant("zero", [0]), _constant("one", [1])])
    plan = analyse(model)
    assert plan.tail == [] and plan.classes["y"] == SAMPLE
    assert plan.edits[0].identity and plan.edits[1].axes == [2] and plan.edits[2].axes == [1]
    _rows_agree(model.SerializeToString(), (1, 2, 3))


@pytest.mark.parametrize("nodes, out_shape, reason", [
    ([helper.make_node("ReduceMax", ["x"], ["m"], keepdims=0), helper.make_node("Unsqueeze", ["m", "zero"], ["m1"]),
      helper.make_node("Concat", ["m1", "m1"], ["y"], axis=0)], [2], "reads a sample value"),
    ([helper.make_node("Gather", ["x", "zero_scalar"], ["plane"], axis=0),
      helper.make_node("Add", ["plane", "row"], ["y"])], [2, 3], "over the row dim"),
    ([helper.make_node("Gather", ["x", "one_scalar"], ["plane"], axis=0)], [2, 3], "dim 0"),
])
def test_sample_values_that_would_meet_other_rows_are_refused(nodes, out_shape, reason):
    """A sample value concatenated along the group's dim, or broadcast against a row so that
    its own dims would cover the row dim; ``x[1]`` of a one-row tensor is out of range."""
    inputs = [_floats("x", [1, 2, 3]), _floats("row", [1, 3])]
    model = _graph(nodes, inputs, [_floats("y", out_shape)],
                   [_constant("zero", [0]), _scalar("zero_scalar", 0), _scalar("one_scalar", 1)])
    plan = analyse(model)
    assert plan.tail and reason in plan.first_refusal, plan.first_refusal


class FlatHead(nn.Module):
    """A head written for one sample: flatten everything, then a linear layer on the vector."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(6)
        self.conv, self.fc = nn.Conv2d(2, 3, 3, padding=1), nn.Linear(3 * 4 * 4, 5)

    def forward(self, x):
        feat = torch.relu(self.conv(x)).view(-1)
        return self.fc(feat).unsqueeze(0)


def test_a_flattened_sample_through_a_linear_layer_is_batched():
    data = _export(FlatHead().eval(), torch.randn(1, 2, 4, 4))
    plan = analyse(fold_static_shapes(onnx.load_model_from_string(data)))
    assert plan.tail == []
    assert [edit.target for edit in plan.edits.values() if edit.target] == [(0, -1)]
    assert _scans(group_model(data)) == []
    _rows_agree(data, (1, 2, 4, 4))


@pytest.mark.parametrize("nodes, initializers, reason", [
    ([helper.make_node("Reshape", ["x", "flat"], ["v"]), helper.make_node("MatMul", ["w", "v"], ["y"])],
     [_constant("flat", [-1]), _constant("w", np.ones((5, 6)), np.float32)], "meet other samples"),
    ([helper.make_node("Reshape", ["x", "flat"], ["v"]), helper.make_node("MatMul", ["v", "w"], ["y"])],
     [_constant("flat", [-1]), _constant("w", np.ones((2, 6, 5)), np.float32)], "meet other samples"),
    ([helper.make_node("Reshape", ["x", "cube"], ["c"]), helper.make_node("Reshape", ["c", "copy"], ["y"])],
     [_constant("cube", [1, 3, 2]), _constant("copy", [-1, 0])], "copies input dims"),
])
def test_flattened_samples_that_would_meet_other_samples_are_refused(nodes, initializers, reason):
    """``W @ v`` (the group's rows would be contracted) and a stack of matrices (it would
    broadcast against the group) stay per sample, as does a target that copies dims by 0."""
    model = _graph(nodes, [_floats("x", [1, 6])], [_floats("y", None)], initializers)
    plan = analyse(model)
    assert plan.tail and reason in plan.first_refusal, plan.first_refusal


def test_cast_like_takes_the_class_of_the_values_it_casts():
    """``CastLike(values, like)``: the output is ``values`` (shape and all), whatever ``like`` is."""
    nodes = [helper.make_node("ReduceMax", ["x"], ["m"], keepdims=0),
             helper.make_node("CastLike", ["x", "m"], ["rows"]), helper.make_node("CastLike", ["w", "m"], ["y"])]
    model = _graph(nodes, [_floats("x", [1, 6])], [_floats("rows", [1, 6]), _floats("y", [5])],
                   [_constant("w", np.arange(5), np.float32)])
    plan = analyse(model)
    assert plan.classes["rows"] == "rowed" and plan.batched == [0, 1]
    assert plan.tail == [2] and "shared value cast like" in plan.first_refusal
    _rows_agree(model.SerializeToString(), (1, 6))


class GreedyStep(nn.Module):
    """Single-sample greedy choices over a flattened score vector."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(8)
        self.fc = nn.Linear(6, 10)

    def forward(self, x):
        scores = self.fc(x).view(-1)
        probs = F.softmax(scores, dim=0)
        best = scores.argmax()
        top = torch.topk(probs, 3).values
        return best, top, F.log_softmax(scores, dim=-1)


def test_argmax_softmax_and_topk_of_a_flattened_sample_are_batched():
    data = _export(GreedyStep().eval(), torch.randn(1, 6))
    plan = analyse(fold_static_shapes(onnx.load_model_from_string(data)))
    assert plan.tail == []
    assert sorted(edit.axis for edit in plan.edits.values() if edit.axis is not None) == [1, 1, 1, 1]
    assert _scans(group_model(data)) == []
    _rows_agree(data, (1, 6))
