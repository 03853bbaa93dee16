"""Patterns of the dynamic networks in the DyCL authors' artifact (issue 27), each in a model
of our own written the way such research code is written, compiled with ``dycl.compile``'s
defaults and compared with eager on inputs that take several paths, in process and as a
torch-free host: a numpy scalar in the output (``np.argmax`` over exit confidences), a
method that describes a block (``block.kind() == "down"``), a Python list of thresholds
passed to an inference method, ``len(x)`` as a size."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from dycl.rewriter.pure_methods import is_pure_method
from torch import nn
from torch.nn import functional as F

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch


def varied(*shape: int, count: int, seed: int) -> list[torch.Tensor]:
    """Inputs of several scales, so that confidence tests go both ways."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator) * (0.05 + 1.5 * (i % 5)) for i in range(count)]


def agree(model: nn.Module, example, inputs, tmp_path, atol: float = 1e-5) -> int:
    """Compile ``model`` with the defaults; assert it agrees with eager in process and as a
    torch-free host on ``inputs``; the number of distinct eager paths they took."""
    compiled = dycl.compile(model, example)
    paths = assert_equivalent(model, compiled, inputs, min_paths=2, atol=atol)
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, inputs, atol)
    assert report["checked"] == len(inputs) and not report["problems"], report
    return paths


# -- np.argmax over the exits' confidences: a numpy scalar in the output ----------------------------


class AnytimeNet(nn.Module):
    """Exits after each stage; without a confident exit, the most confident one wins."""

    def __init__(self, threshold: float = 0.6) -> None:
        super().__init__()
        self.stages = nn.ModuleList([nn.Linear(6, 6), nn.Linear(6, 6), nn.Linear(6, 6)])
        self.heads = nn.ModuleList([nn.Linear(6, 4) for _ in range(3)])
        self.threshold = threshold

    def forward(self, x):
        confidences, outputs = [], []
        for stage, head in zip(self.stages, self.heads):
            x = torch.relu(stage(x))
            logits = head(x)
            outputs.append(logits)
            confidence = F.softmax(logits[0], dim=0).max()
            confidences.append(confidence)
            if confidence > self.threshold:
                return logits, len(outputs) - 1
        best = np.argmax(confidences)
        return outputs[best], best


def test_numpy_argmax_over_confidences_returns_a_numpy_scalar(tmp_path):
    torch.manual_seed(0)
    model = AnytimeNet().eval()
    inputs = varied(1, 6, count=16, seed=1)
    with torch.no_grad():
        kinds = {type(model(x)[1]) for x in inputs}
    assert kinds == {int, np.int64}  # both exits' outputs are among the inputs
    assert agree(model, inputs[0], inputs, tmp_path) >= 2


# -- a method that describes a block, folded ---------------------------------------------------------


class Block(nn.Module):
    def __init__(self, channels: int, stride: int) -> None:
        super().__init__()
        self.stride = stride
        self.conv = nn.Conv2d(channels, channels, 3, stride=stride, padding=1)

    def kind(self):
        """What the block does to the feature map (read by the network's forward)."""
        return "down" if self.stride == 2 else "plain"

    def forward(self, x):
        return torch.relu(self.conv(x))


class PyramidNet(nn.Module):
    """Plain blocks are residual, downsampling ones are not; an exit after each block."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(4, 1), Block(4, 2), Block(4, 1)])
        self.head = nn.Linear(4, 3)

    def forward(self, x):
        for block in self.blocks:
            if block.kind() == "down":
                x = block(x)
            else:
                x = x + block(x)  # with a "down" block the shapes differ: never run for it
            logits = self.head(x.mean(dim=(2, 3)))
            if logits.softmax(-1).max() > 0.5:
                return logits
        return logits


def test_a_method_returning_a_static_expression_is_folded(tmp_path):
    torch.manual_seed(2)
    model = PyramidNet().eval()
    inputs = varied(1, 4, 8, 8, count=16, seed=3)
    assert agree(model, inputs[0], inputs, tmp_path) >= 3  # an exit after each of the first two blocks, or none


class Counting(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    @property
    def stride(self):
        self.calls += 1
        return 2

    def reads_property(self):
        return self.stride == 2

    def calls_something(self):
        return len(self.stride_list())

    def stride_list(self):
        return [2]

    def plain(self):
        """A docstring first."""
        return self.training or "mode"


def test_only_methods_that_run_no_code_are_called_at_compile_time():
    module = Counting()
    assert is_pure_method(module.plain)
    assert is_pure_method(Block(2, 2).kind)
    assert not is_pure_method(module.reads_property)  # a property runs code
    assert not is_pure_method(module.calls_something)
    assert not is_pure_method(module.stride_list.__func__)  # not bound to a module
    assert module.calls == 0


# -- a Python list of thresholds passed to an inference method ----------------------------------------


class Cascade(nn.Module):
    """Each exit has its own threshold; the method returns the logits of the exits it ran."""

    def __init__(self) -> None:
        super().__init__()
        self.stages = nn.ModuleList([nn.Linear(5, 5) for _ in range(3)])
        self.exits = nn.ModuleList([nn.Linear(5, 3) for _ in range(3)])
        self.thresholds = [0.5, 0.6, -1.0]

    def run(self, x, thresholds):
        seen = []
        for i in range(len(self.stages)):
            x = torch.tanh(self.stages[i](x))
            logits = self.exits[i](x)
            seen.append(logits)
            if F.softmax(logits, dim=-1).max() > thresholds[i]:
                return seen
        return seen

    def forward(self, x):
        return self.run(x, self.thresholds)


def test_a_list_of_thresholds_passed_to_a_method(tmp_path):
    torch.manual_seed(4)
    model = Cascade().eval()
    inputs = varied(1, 5, count=16, seed=5)
    with torch.no_grad():
        lengths = {len(model(x)) for x in inputs}
    assert len(lengths) >= 2  # the returned list's length follows the exit
    assert agree(model, inputs[0], inputs, tmp_path) >= 2


@pytest.mark.parametrize("change", ["item", "rebind"])
def test_thresholds_changed_after_compiling_are_not_used_silently(change):
    torch.manual_seed(4)
    model = Cascade().eval()
    x = varied(1, 5, count=1, seed=5)[0]
    compiled = dycl.compile(model, x)
    if change == "item":
        model.thresholds[0] = 0.0
    else:
        model.thresholds = [0.0, 0.0, 0.0]
    with pytest.raises(dycl.StaleConfigError, match="thresholds"):
        compiled(x)


# -- len(x) as a size in compiled code stays symbolic ----------------------------------------------------


class PlaceholderExits(nn.Module):
    """An exit that is not taken hands back a zero prediction sized by the batch."""

    def __init__(self, classes: int = 3) -> None:
        super().__init__()
        self.classes = classes
        self.stem, self.body = nn.Linear(6, 8), nn.Linear(8, 8)
        self.early, self.late = nn.Linear(8, classes), nn.Linear(8, classes)

    def forward(self, x):
        h = torch.relu(self.stem(x))
        early = self.early(h)
        if F.softmax(early, dim=-1).max() > 0.6:
            return early, torch.zeros([len(x), self.classes])
        h = torch.relu(self.body(h))
        return torch.zeros(len(h), self.classes), self.late(h)


def test_len_of_a_tensor_as_a_size_keeps_the_batch_symbolic(tmp_path):
    torch.manual_seed(6)
    model = PlaceholderExits().eval()
    generator = torch.Generator().manual_seed(7)
    inputs = [torch.randn(1 + i % 3, 6, generator=generator) * (0.2 + 2 * (i % 4)) for i in range(16)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", dycl.SpecialisationWarning)  # no size is pinned to the example's
        paths = agree(model, inputs[0], inputs, tmp_path)
    assert paths >= 2
    assert {len(x) for x in inputs} == {1, 2, 3}
