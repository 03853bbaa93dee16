"""``forward`` is found as Python finds it: an instance attribute wins (item 7)."""

from __future__ import annotations

import functools
import textwrap

import pytest
import torch
import torch.nn as nn

import dycl
from dycl import rewriter
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch

ATOL = 1e-5


class EarlyExitNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem, self.head = nn.Linear(4, 4), nn.Linear(4, 2)
        self.forward = self.early_exit  # inference mode, as the SDN authors switch it

    def forward(self, x):
        return self.head(torch.relu(self.stem(x)))

    def early_exit(self, x):
        h = torch.relu(self.stem(x))
        if h.sum() > 1.0:
            return h[:, :2]
        return self.head(h)


class Block(nn.Module):
    def __init__(self, fast: bool):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        if fast:
            self.forward = self.skip_when_small

    def forward(self, x):
        return self.fc(x)

    def skip_when_small(self, x):
        if x.abs().mean() < 0.5:
            return x
        return torch.relu(self.fc(x))


class TwoBlocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.slow, self.fast = Block(False), Block(True)

    def forward(self, x):
        x = self.slow(x)
        x = self.fast(x)
        if x.sum() > 0:
            return x * 2
        return x


class Thresholded(nn.Module):
    def __init__(self, threshold: float):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.forward = functools.partial(self.infer, threshold=threshold)

    def infer(self, x, threshold=100.0):
        h = self.fc(x)
        if h.sum() > threshold:
            return h
        return -h


class UsesThresholded(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Thresholded(0.0)

    def forward(self, x):
        return self.inner(x) + 1


def _inputs(count: int = 8) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(2)
    return [torch.randn(1, 4, generator=generator) * s for s in (0.1, 1, 3, 0.3) for _ in range(count // 4)]


def _differs_from_class_forward(model: nn.Module, inputs: list[torch.Tensor]) -> int:
    """How many inputs the class's own forward gets wrong (what dycl compiled before)."""
    with torch.no_grad():
        return sum(not torch.allclose(type(model).forward(model, x), model(x)) for x in inputs)


@pytest.mark.parametrize("build", [EarlyExitNet, TwoBlocks, lambda: Thresholded(0.0), UsesThresholded],
                         ids=["instance-forward", "submodule-instance-forward", "partial", "submodule-partial"])
def test_instance_forward_compiles_what_python_calls(build, tmp_path):
    torch.manual_seed(0)
    model = build().eval()
    inputs = _inputs(12)
    if isinstance(model, EarlyExitNet):
        assert _differs_from_class_forward(model, inputs) >= 2, "the test must tell the two forwards apart"
    compiled = dycl.compile(model, inputs[0])
    assert assert_equivalent(model, compiled, inputs, atol=ATOL) >= 2
    report = run_host_without_torch(compiled.save(tmp_path / "net"), model, inputs, ATOL)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


def test_submodule_instance_forward_is_followed():
    torch.manual_seed(0)
    model = TwoBlocks().eval()
    inputs = _inputs(12)
    # the fast block's own branch must be one of the paths, or compiling its class forward would pass too
    with torch.no_grad():
        skipped = [bool(model.slow(x).abs().mean() < 0.5) for x in inputs]
    assert any(skipped) and not all(skipped)
    compiled = dycl.compile(model, inputs[0], backend="torch")
    assert assert_equivalent(model, compiled, inputs, atol=ATOL) >= 3


def test_plain_function_on_the_instance_is_refused():
    model = EarlyExitNet().eval()
    model.forward = lambda x: x * 2  # Python calls it without self
    with pytest.raises(dycl.UnsupportedError, match="not a method"):
        dycl.compile(model, torch.randn(1, 4))


def test_partial_with_positional_arguments_is_refused():
    model = Thresholded(0.0).eval()
    model.forward = functools.partial(model.infer, torch.ones(1, 4))
    with pytest.raises(dycl.UnsupportedError, match="positional"):
        dycl.compile(model, torch.randn(1, 4))


def test_golden_rewrite_of_an_instance_forward():
    source = rewriter.rewrite(EarlyExitNet()).plain_source
    assert source.strip() == textwrap.dedent("""
        def early_exit(self, x):
            h = torch.relu(self.stem(x))
            if h.sum() > 1.0:
                return h[:, :2]
            return self.head(h)
    """).strip()
    partial = rewriter.rewrite(Thresholded(0.25))
    assert "if h.sum() > 0.25:" in partial.plain_source
    assert partial.specialized == {"threshold": 0.25}
