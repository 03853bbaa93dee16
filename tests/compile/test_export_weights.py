"""Each sub-DNN is handed to the exporter with only the weights its statements read
(``dycl.export.read_weights``), under the names the whole model gives them: an export no
longer walks the whole model's state, and the compiled model still gives what eager gives,
on both branches, in process and through the torch-free host."""

from __future__ import annotations

import libcst as cst
import onnx
import torch
import torch.nn.functional as F
from torch import nn

import dycl
from dycl.export.read_weights import read_roots, weights_tree
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch


class TwoExperts(nn.Module):
    """A router picks one of two experts by the encoding's mean; an auxiliary head used only
    in training and a learned temperature sit on the model as people keep them."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(16, 64), nn.GELU())
        self.experts = nn.ModuleList([nn.Linear(64, 64), nn.Linear(64, 64)])
        self.aux_head = nn.Linear(64, 1000)  # training only
        self.temperature = nn.Parameter(torch.tensor(1.5))
        self.register_buffer("bias", torch.linspace(-1, 1, 64))

    def forward(self, x):
        h = self.encoder(x)
        if h.mean() > 0.05:
            out = self.experts[0](h) + self.bias
        else:
            out = F.relu(self.experts[1](h)) / self.temperature
        return out.softmax(-1)


def _inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    return [torch.randn(2, 16, generator=generator) * scale for scale in (0.2, 3.0) for _ in range(6)]


def _handed(monkeypatch) -> list[tuple[set[str], set[str]]]:
    """For every export: the state entries the exported module holds, and the graph's initializers."""
    seen: list[tuple[set[str], set[str]]] = []
    export = torch.onnx.export

    def spy(module, args, f, *rest, **kwargs):
        result = export(module, args, f, *rest, **kwargs)
        graph = onnx.load_from_string(f.getvalue()).graph
        seen.append((set(torch.jit._unique_state_dict(module)), {t.name for t in graph.initializer}))
        return result

    monkeypatch.setattr(torch.onnx, "export", spy)
    return seen


def test_each_export_holds_only_the_weights_its_sub_dnn_reads(monkeypatch, tmp_path):
    torch.manual_seed(0)
    model = TwoExperts().eval()
    handed = _handed(monkeypatch)
    compiled = dycl.compile(model, _inputs()[0])
    everything = set(model.state_dict())
    assert len(handed) >= 3, handed  # the encoder with the test, and each expert
    for state, initializers in handed:
        assert not any(name.startswith("model.aux_head.") for name in state), state
        assert not ({"model.experts.0.weight", "model.experts.1.weight"} <= state), state
        assert {name.removeprefix("model.") for name in state} < everything
        # every weight handed over is one the graph reads, under the whole model's name
        assert {name for name in state if "." in name.removeprefix("model.")} <= initializers | {
            "model.temperature", "model.bias"}, (state, initializers)
    total = sum(len(state) for state, _ in handed)
    assert total <= 2 * len(everything) - 2 * 2, handed  # no export held the auxiliary head's two tensors
    inputs = _inputs()
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5) == 2
    artifact = compiled.save(tmp_path / "experts")
    assert assert_equivalent(model, dycl.load(artifact), inputs, min_paths=2, atol=1e-5) == 2
    standalone = run_host_without_torch(artifact, model, inputs, atol=1e-5)
    assert standalone["checked"] == len(inputs) and not standalone["problems"], standalone


def _roots(source: str, model: nn.Module) -> set[str] | None:
    return read_roots(list(cst.parse_module(source).body), "self", model)


def test_the_read_parts_of_the_model_by_chain():
    model = TwoExperts()
    model.depth = 2
    assert _roots("h = self.encoder(x)\n", model) == {"encoder"}
    assert _roots("h = self.encoder[0](x)\ny = self.experts[-1](h) * self.temperature\n", model) == {
        "encoder.0", "experts.1", "temperature"}
    assert _roots("y = self.experts[k](h) + self.bias\n", model) == {"experts", "bias"}  # a dynamic index
    assert _roots("y = self.experts[0].weight.t()\n", model) == {"experts.0.weight"}
    assert _roots("n = self.depth + self.training\n", model) == set()  # plain values read no state
    assert _roots("y = self.experts[0].extra_repr()\n", model) == {"experts.0"}  # a method of a submodule
    assert _roots("y = helper(self, x)\n", model) is None  # the model as a value: all of it
    assert _roots("y = self.forward(x)\n", model) is None  # a method of the model itself
    assert _roots("y = self(x)\n", model) is None



class _Aliased(nn.Module):
    """Old attribute names kept working by a ``__getattr__`` of the class's own."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Linear(4, 4)
        self.inner = _AliasedInner()

    def __getattr__(self, name):
        return super().__getattr__({"enc": "encoder"}.get(name, name))


class _AliasedInner(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def __getattr__(self, name):
        return super().__getattr__({"p": "proj"}.get(name, name))


def test_a_name_only_a_getattr_of_its_own_resolves_reads_the_whole_module():
    """``self.enc`` is no registry entry and no plain attribute: it was once read as a plain
    value, so the exporter never saw the encoder's weights (a crash, or a frozen constant)."""
    model = _Aliased()
    assert _roots("h = self.enc(x)\n", model) is None
    assert _roots("h = self.encoder(x)\n", model) is None  # the class's own lookup runs first
    plain = TwoExperts()
    assert _roots("h = self.missing(x)\n", plain) is None
    outer = nn.Module()
    outer.block = _AliasedInner()
    assert _roots("h = self.block.p(x)\n", outer) == {"block"}  # the whole submodule below its own lookup

def test_the_tree_registers_the_models_own_objects_under_their_paths():
    model = TwoExperts()
    tree = weights_tree(model, {"experts.1", "experts", "temperature", "encoder.0", "bias"})
    state = tree.state_dict(keep_vars=True)
    assert set(state) == {"experts.0.weight", "experts.0.bias", "experts.1.weight", "experts.1.bias",
                          "temperature", "encoder.0.weight", "encoder.0.bias", "bias"}
    assert all(state[name] is value for name, value in model.state_dict(keep_vars=True).items() if name in state)
    assert tree.experts is model.experts and tree.encoder is not model.encoder
