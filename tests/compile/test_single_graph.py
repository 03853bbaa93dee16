"""The single-graph lowering (issue 29, ``Levers(single_graph=...)``): the whole HCFG as one
ONNX model with ``If`` nodes, called once per model call, equal to eager on every path, in
process and through the torch-free host; a model it cannot lower keeps its host."""

from __future__ import annotations

import copy

import onnx
import pytest
import torch
import torch.nn.functional as F
from dycl.hcfg.levers import Levers
from torch import nn

import dycl
from dycl.backends import single_graph_choice
from dycl.backends.onnx_compose import nested_graphs
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch

ON = Levers(single_graph="on")


@pytest.fixture(autouse=True)
def _seeded_weights():
    torch.manual_seed(0)  # the models' weights, and so the paths the inputs take, are the same every run


class EarlyExitMLP(nn.Module):
    """Exits when a head is confident, as an SDN does (the test is a float compared with a constant)."""

    def __init__(self) -> None:
        super().__init__()
        self.stages = nn.ModuleList([nn.Linear(16, 16) for _ in range(3)])
        self.heads = nn.ModuleList([nn.Linear(16, 4) for _ in range(3)])

    def forward(self, x):
        for stage, head in zip(self.stages, self.heads):
            x = torch.relu(stage(x))
            logits = head(x)
            if F.softmax(logits, dim=-1).max().item() >= 0.4:
                return logits
        return logits * 2


class SkipWithCounter(nn.Module):
    """Gated blocks that are skipped, joined after each ``if``, with a Python counter returned."""

    def __init__(self) -> None:
        super().__init__()
        self.gates = nn.ModuleList([nn.Linear(8, 1) for _ in range(4)])
        self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(4)])

    def forward(self, x):
        ran = 0
        for gate, block in zip(self.gates, self.blocks):
            keep = torch.sigmoid(gate(x)).mean() > 0.5
            if keep:
                x = torch.tanh(block(x)) + x
                ran += 1
            else:
                x = x * 0.5
        return x, ran


class NestedDecisions(nn.Module):
    """Nested ``if``s on data, a join whose sides leave different tensors, then an exit in a branch."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(6, 6)
        self.b = nn.Linear(6, 6)
        self.c = nn.Linear(6, 3)

    def forward(self, x):
        h = self.a(x)
        s = h.sum()
        if s > 0:
            if h.max() > 1.0:
                h = self.b(h)
            else:
                h = -h
        else:
            h = torch.sigmoid(h)
        feats = [h]
        if h.mean() < 0:
            return self.c(h), feats
        feats.append(self.b(h))
        return self.c(feats[-1]), feats


class PartialExit(nn.Module):
    """A return on one inner side of an ``if`` whose other paths go on: the rest is lowered on both sides."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(6, 6)
        self.b = nn.Linear(6, 6)
        self.c = nn.Linear(6, 2)

    def forward(self, x):
        h = self.a(x)
        if h.mean() > 0:
            if h.max() > 1.5:
                return h.sum(dim=-1, keepdim=True)
            h = self.b(h)
        return self.c(h)


class TupleBookkeeping(nn.Module):
    """Host bookkeeping between the blocks: a list appended to, indexed from the end, its length,
    a tuple built and returned from inside the loop."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])

    def forward(self, x):
        outs = []
        for block in self.blocks:
            x = torch.tanh(block(x))
            outs.append(x)
            if x.mean() > 0.1:
                pair = (outs[-1], len(outs))
                return pair
        last = outs[-1]
        return outs[0] + last, len(outs)


class RoundsOnTheHost(nn.Module):
    """A Python number rounded by a builtin: a host computation the graph does not make, so the host stays."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        scale = round(y.abs().max().item(), 1)
        if scale > 1.5:
            return y / scale, "scaled"
        return y, "kept"


class CallCounter(nn.Module):
    """A call counter in a buffer switches the path: module state, which the host keeps."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(6, 6)
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.calls += 1
        h = self.proj(x)
        if self.calls <= 2:
            return h * 0.5
        if h.mean() > 0:
            return torch.relu(h)
        return torch.tanh(h)


def _inputs(shape: tuple[int, ...], count: int, scale: float = 1.0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(*shape, generator=generator) * scale * (1 + i % 5) for i in range(count)]


def _check(model: nn.Module, inputs: list[torch.Tensor], tmp_path, min_paths: int) -> dycl.CompiledModel:
    compiled = dycl.compile(model, inputs[0], optimize=ON)
    assert compiled.stats["single_graph"]["chosen"] == "single_graph", compiled.stats["single_graph"]
    assert len(compiled.manifest.sub_dnns) == 1  # one session call per model call
    paths = assert_equivalent(model, compiled, inputs, min_paths=min_paths, atol=1e-5)
    assert paths >= min_paths
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, inputs, 1e-5)
    assert report["checked"] == len(inputs) and report["problems"] == [], report
    loaded = dycl.load(tmp_path / "artifact")
    assert_equivalent(model, loaded, inputs[:8], min_paths=2, atol=1e-5)
    return compiled


def test_early_exits_lower_to_one_graph(tmp_path):
    model = EarlyExitMLP().eval()
    compiled = _check(model, _inputs((1, 16), 40, 2.0), tmp_path, min_paths=4)
    assert compiled.stats["single_graph"]["paths"] == 4  # three exits and the end


def test_skipped_blocks_join_and_a_counter_is_returned_as_a_python_int(tmp_path):
    model = SkipWithCounter().eval()
    compiled = _check(model, _inputs((2, 8), 40), tmp_path, min_paths=8)
    x = _inputs((2, 8), 3)[2]
    assert type(compiled(x)[1]) is int and compiled(x)[1] == model(x)[1]
    other_batches = [x for batch in (1, 3, 5) for x in _inputs((batch, 8), 8)]  # the batch is symbolic
    assert assert_equivalent(model, compiled, other_batches, min_paths=3, atol=1e-5) >= 3


def test_nested_ifs_a_join_and_an_exit_with_a_list(tmp_path):
    model = NestedDecisions().eval()
    _check(model, _inputs((3, 6), 48, 0.5), tmp_path, min_paths=4)


def test_a_return_on_one_inner_side_lowers(tmp_path):
    model = PartialExit().eval()
    compiled = _check(model, _inputs((2, 6), 36, 0.5), tmp_path, min_paths=3)
    assert compiled.stats["single_graph"]["paths"] == 3


def test_host_lists_tuples_and_indices_lower(tmp_path):
    model = TupleBookkeeping().eval()
    compiled = _check(model, _inputs((2, 8), 30), tmp_path, min_paths=3)
    assert compiled.stats["single_graph"]["paths"] == 4


def test_a_model_it_cannot_lower_keeps_its_host(tmp_path):
    model = RoundsOnTheHost().eval()
    inputs = _inputs((2, 4), 20)
    compiled = dycl.compile(model, inputs[0], optimize=ON)
    chosen = compiled.stats["single_graph"]
    assert chosen["chosen"] == "host" and chosen["reason"], chosen
    assert len(compiled.manifest.sub_dnns) >= 1
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5) >= 2
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, inputs, 1e-5)
    assert report["checked"] == len(inputs) and report["problems"] == [], report


def test_module_state_keeps_the_host_and_its_state():
    model = CallCounter().eval()
    twin = copy.deepcopy(model)
    inputs = _inputs((2, 6), 12)
    compiled = dycl.compile(model, inputs[0], optimize=ON)
    chosen = compiled.stats["single_graph"]
    assert chosen["chosen"] == "host" and "state" in chosen["reason"], chosen
    paths = set()
    for x in inputs:  # the same calls in the same order: the counter moves alike
        with torch.no_grad():
            expected = twin(x)
            paths.add("warm-up" if int(twin.calls) <= 2 else bool(twin.proj(x).mean() > 0))
        assert torch.allclose(compiled(x), expected, atol=1e-5)
    assert int(model.calls) == int(twin.calls) == len(inputs)
    assert len(paths) == 3, paths  # the warm-up and both sides of the data test


def test_per_sample_batching_keeps_its_host():
    model = EarlyExitMLP().eval()
    inputs = _inputs((1, 16), 12, 2.0)
    compiled = dycl.compile(model, inputs[0], optimize=ON, per_sample=True)
    chosen = compiled.stats["single_graph"]
    assert chosen["chosen"] == "host" and "per-sample" in chosen["reason"], chosen
    batch = torch.cat(inputs)  # each sample takes its own path, as it does alone
    expected = torch.cat([model(x) for x in inputs])
    assert torch.allclose(compiled(batch), expected, atol=1e-5)
    assert assert_equivalent(model, compiled, inputs, min_paths=3, atol=1e-5) >= 3


def test_auto_times_both_and_records_its_choice(monkeypatch):
    monkeypatch.setattr(single_graph_choice, "TINY_MACS", 0)  # timed although tiny (as a bigger model is)
    model = EarlyExitMLP().eval()
    inputs = _inputs((1, 16), 30, 2.0)
    compiled = dycl.compile(model, inputs[0], optimize=Levers(single_graph="auto"))
    chosen = compiled.stats["single_graph"]
    assert chosen["chosen"] in ("host", "single_graph") and chosen["host_us"] > 0 and chosen["single_graph_us"] > 0
    assert (len(compiled.manifest.sub_dnns) == 1) == (chosen["chosen"] == "single_graph")
    assert assert_equivalent(model, compiled, inputs, min_paths=4, atol=1e-5) >= 4


def test_auto_keeps_a_tiny_model_s_host_untimed():
    model = EarlyExitMLP().eval()
    inputs = _inputs((1, 16), 30, 2.0)
    compiled = dycl.compile(model, inputs[0])
    chosen = compiled.stats["single_graph"]
    assert chosen["mode"] == "auto" and chosen["chosen"] == "host" and "tiny model" in chosen["reason"], chosen
    assert "host_us" not in chosen and len(compiled.manifest.sub_dnns) > 1
    assert assert_equivalent(model, compiled, inputs, min_paths=4, atol=1e-5) >= 4


def test_auto_is_the_default_and_names_are_checked():
    assert Levers().single_graph == "auto"
    with pytest.raises(ValueError, match="single_graph"):
        Levers(single_graph="yes")


def test_the_lowered_graph_branches_with_if_nodes_and_stores_each_weight_once(tmp_path):
    model = EarlyExitMLP().eval()
    compiled = dycl.compile(model, _inputs((1, 16), 1)[0], optimize=ON)
    directory = compiled.save(tmp_path / "artifact")
    graph = onnx.load(str(directory / "single_graph.onnx")).graph
    assert sum(node.op_type == "If" for node in graph.node) == 1  # the first exit; the others nest in it
    graphs = nested_graphs(graph)
    assert sum(node.op_type == "If" for one in graphs for node in one.node) == 3
    initializers = [t for one in graphs for t in one.initializer]
    weights = sum(p.numel() for p in model.parameters())
    stored = sum(onnx.numpy_helper.to_array(t).size for t in initializers)
    assert weights <= stored < weights + 64  # each weight once, plus a few constants
    # a branch holds the weights only it reads (ONNX Runtime folds and prepacks them there)
    assert sum(len(one.initializer) for one in graphs[1:]) > len(graph.initializer)


def test_the_host_makes_one_call_then_returns_the_structure_of_the_path_taken():
    model = NestedDecisions().eval()
    compiled = dycl.compile(model, _inputs((3, 6), 1, 0.5)[0], optimize=ON)
    source = compiled.host_source
    method = source[source.index("    def _forward"):source.index("\n\n\nif __name__")]
    lines = [line.split("  #")[0].rstrip() for line in method.splitlines()]
    (index,) = [entry.file.removesuffix(".onnx") for entry in compiled.manifest.sub_dnns.values()]
    assert index == "single_graph"
    assert lines[1].endswith(" = self._call[9](x)")  # after the 9 sub-DNNs the host would have called
    assert lines == [
        "    def _forward(self, x):",
        "        single_out_0, single_out_1, single_out_2, single_path, single_decisions = self._call[9](x)",
        "        single_path = single_path.item()",
        "        if single_path == 0:",
        "            return (single_out_0, [single_out_1])",
        "        else:",
        "            return (single_out_0, [single_out_1, single_out_2])",
    ]
