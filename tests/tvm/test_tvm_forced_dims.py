"""A dim named symbolic that the weights pin (``dynamic="all"`` over a Linear's in-features)
builds on TVM: ``dycl.backends.tvm.forced_dims`` makes it static for the Relax importer,
whose ArgMax converter failed on the value of unknown shape it got (issue 29, a greedy
decoder). The batch, which no weight pins, stays symbolic."""

from __future__ import annotations

import io
import warnings

import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

import dycl
from dycl.backends.tvm.forced_dims import forced_dims, pinned
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch

ATOL = 1e-4


def _exported(module: nn.Module, example: torch.Tensor, axes: dict[int, str]) -> onnx.ModelProto:
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), (example,), buffer, dynamo=False, opset_version=17, input_names=["x"],
                          dynamic_axes={"x": axes})
    return onnx.load_from_string(buffer.getvalue())


class Stem(nn.Module):
    """A conv stem and a linear head: channels pinned by the conv, features by the linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.conv(x).mean(dim=(2, 3)))


def test_weights_pin_channels_and_features_but_not_batch_or_image_size():
    model = _exported(Stem(), torch.randn(1, 3, 8, 8), {0: "batch", 1: "channels", 2: "h", 3: "w"})
    assert forced_dims(model) == {"channels": 3}
    static = pinned(model)
    [x] = static.graph.input
    dims = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in x.type.tensor_type.shape.dim]
    assert dims == ["batch", 3, "h", "w"]
    assert pinned(_exported(Stem(), torch.randn(1, 3, 8, 8), {0: "batch"})) is None  # nothing to pin


class Fused(nn.Module):
    """Two inputs concatenated before a Linear, as a decoder joins an embedding and a context."""

    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(7, 2)

    def forward(self, x: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        return self.head(torch.cat([x, context], dim=1))


def test_a_concatenation_joins_its_batches_and_pins_its_one_named_part():
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Fused().eval(), (torch.randn(1, 4), torch.randn(1, 3)), buffer, dynamo=False,
                          opset_version=17, input_names=["x", "context"],
                          dynamic_axes={"x": {0: "b", 1: "f"}, "context": {0: "b2"}})
    model = onnx.load_from_string(buffer.getvalue())
    forced = forced_dims(model)
    assert forced["b2"] == "b" and forced["f"] == 4 and "b" not in forced
    shapes = [[d.dim_value if d.HasField("dim_value") else d.dim_param for d in value.type.tensor_type.shape.dim]
              for value in pinned(model).graph.input]
    assert shapes == [["b", 4], ["b", 3]]


class GreedyTagger(nn.Module):
    """Tags a feature vector step by step with a GRU cell, feeding back its last tag, and stops
    at the stop tag: the way a small greedy decoder is usually written."""

    def __init__(self, features: int = 6, tags: int = 5, stop: int = 0, steps: int = 4) -> None:
        super().__init__()
        self.cell = nn.GRUCell(features + tags, features)
        self.out = nn.Linear(features, tags)
        self.tags, self.stop, self.steps = tags, stop, steps

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        previous = torch.zeros(state.shape[0], self.tags)
        found = []
        for _ in range(self.steps):
            state = self.cell(torch.cat([state, previous], dim=1), state)
            tag = self.out(state).argmax(dim=-1)
            found.append(tag)
            if tag[0].item() == self.stop:
                break
            previous = F.one_hot(tag, self.tags).float()
        return torch.stack(found, dim=1)


def test_a_greedy_decoder_with_every_dim_symbolic_builds_on_tvm_and_equals_eager(tmp_path):
    torch.manual_seed(3)
    model = GreedyTagger().eval()
    generator = torch.Generator().manual_seed(5)
    inputs = [torch.randn(1, 6, generator=generator) * 3 for _ in range(24)]
    compiled = dycl.compile(model, inputs[0], backend="tvm", dynamic="all")
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=ATOL) >= 2
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, inputs, ATOL)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}, report
