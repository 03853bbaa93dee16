"""Issue 26 item 5: random sampling in compiled code is refused at the user's line
(no exported sampler is known to draw like torch); eval-mode dropout compiles; the
torch backend, which runs torch itself, draws with eager's distribution."""

from __future__ import annotations

import math

import onnx
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import TensorProto, helper

import dycl
from dycl.backends.sampling import sampling_nodes
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch


class DropoutGate(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = F.dropout(self.fc(x), 0.5)  # training=True is the functional default
        if h[0, 0] != 0:
            return h
        return -h


class NoisyBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        if h.sum() > 0:
            return h + 0.1 * torch.randn_like(h)
        return h


class CoinFlip(nn.Module):
    def forward(self, x):
        if torch.rand(()) < 0.3:
            return x * 2
        return x


class InPlaceUniform(nn.Module):
    def forward(self, x):
        noise = torch.empty_like(x)
        noise.uniform_(-1, 1)
        if (x + noise).mean() > 0:
            return x + noise
        return x


class Sampled(nn.Module):
    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        p = torch.sigmoid(self.fc(x))
        if self.kind == "bernoulli":
            draw = torch.bernoulli(p)
        else:
            draw = torch.multinomial(p, 1).float()
        if draw.sum() > 1:
            return draw
        return p


def _line_of(model_class: type, text: str) -> int:
    import inspect

    lines, first = inspect.getsourcelines(model_class.forward)
    return first + next(i for i, line in enumerate(lines) if text in line)


@pytest.mark.parametrize("model, text", [
    (DropoutGate(), "F.dropout"), (NoisyBranch(), "torch.randn_like"), (CoinFlip(), "torch.rand(())"),
    (InPlaceUniform(), "noise.uniform_"), (Sampled("bernoulli"), "torch.bernoulli"),
    (Sampled("multinomial"), "torch.multinomial"),
], ids=["dropout", "randn_like", "rand", "uniform_", "bernoulli", "multinomial"])
def test_sampling_in_compiled_code_is_refused_at_its_line(model, text):
    with pytest.raises(dycl.UnsupportedError, match="random sampling") as info:
        dycl.compile(model.eval(), torch.randn(2, 4))
    assert info.value.location.path == __file__
    assert info.value.location.line == _line_of(type(model), text)


class EvalDropout(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        h = self.drop(self.fc(x))
        h = F.dropout(h, 0.2, training=self.training)
        if h.mean() > 0:
            return h * 2
        return F.alpha_dropout(h, 0.1)  # training=False is its default


def test_eval_mode_dropout_compiles(tmp_path):
    torch.manual_seed(0)
    model = EvalDropout().eval()
    generator = torch.Generator().manual_seed(2)
    inputs = [torch.randn(3, 4, generator=generator) + b for b in (-1.0, 1.0) for _ in range(4)]
    compiled = dycl.compile(model, inputs[0])
    assert assert_equivalent(model, compiled, inputs, atol=1e-5) == 2
    report = run_host_without_torch(compiled.save(tmp_path / "art"), model, inputs, atol=1e-5)
    assert report["checked"] == len(inputs) and not report["problems"], report


def test_the_torch_backend_draws_like_eager():
    """The rate of the branch that depends on a dropped element, over many calls, is
    within a binomial 99.9% interval of eager's rate (1 - p = 0.5)."""
    torch.manual_seed(0)
    model = DropoutGate().eval()
    compiled = dycl.compile(model, torch.ones(1, 4) * 3, backend="torch")
    x = torch.ones(1, 4) * 3
    with torch.no_grad():
        assert model.fc(x)[0, 0] != 0  # so the branch depends on the draw alone
        calls = 600
        rates = [sum(bool(run(x)[0, 0] != 0) for _ in range(calls)) / calls for run in (model, compiled)]
    half_width = 3.3 * math.sqrt(0.25 / calls)
    assert all(abs(rate - 0.5) < half_width for rate in rates), rates


def _graph(nodes: list, initializers: list | None = None) -> onnx.GraphProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    return helper.make_graph(nodes, "g", [x], [y], initializer=initializers or [])


def test_sampling_nodes_in_onnx_graphs():
    false = helper.make_tensor("off", TensorProto.BOOL, [], [False])
    true = helper.make_tensor("on", TensorProto.BOOL, [], [True])
    ratio = helper.make_tensor("r", TensorProto.FLOAT, [], [0.5])
    dropout = helper.make_node("Dropout", ["x", "r", "off"], ["y"])
    assert not list(sampling_nodes(_graph([dropout], [false, ratio])))
    assert not list(sampling_nodes(_graph([helper.make_node("Dropout", ["x"], ["y"])])))  # inference form
    training = helper.make_node("Dropout", ["x", "r", "on"], ["y"])
    assert [n.op_type for n in sampling_nodes(_graph([training], [true, ratio]))] == ["Dropout"]
    inner = helper.make_graph([helper.make_node("RandomNormalLike", ["x"], ["z"])], "body", [],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])])
    branch = helper.make_node("If", ["c"], ["y"], then_branch=inner, else_branch=inner)
    assert [n.op_type for n in sampling_nodes(_graph([branch]))] == ["RandomNormalLike"] * 2
