"""Decorated methods keep their decorator's semantics or are refused (issue 14, item 6)."""

from __future__ import annotations

import functools
import inspect

import pytest
import torch
import torch.nn as nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch

ATOL = 1e-5


def add_one(method):
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        return method(*args, **kwargs) + 1

    return wrapper


def logged(method):
    """A wrapper that only forwards: calling it is calling the method."""
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        return method(*args, **kwargs)

    return wrapper


class AddOneHelper(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.gate(self.fc(x))

    @add_one  # MARK
    def gate(self, h):
        if h.sum() > 0:
            return h * 2
        return -h


class AddOneForward(nn.Module):
    @add_one  # MARK
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x


class Harmless(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.out = nn.Linear(4, 4)

    @torch.no_grad()
    def forward(self, x):
        h = self._stage(self.fc(x))
        return self._finish(h)

    @logged
    def _stage(self, h):
        if h.mean() > 0:
            return torch.relu(h)
        return h * 0.5

    @torch.inference_mode()
    def _finish(self, h):
        if h.max() > 0.8:
            return self.out(h)
        return h


@add_one  # MARK
def shrink(x):
    return x * 0.5


class AddOneFunction(nn.Module):
    """A branch-free decorated helper is refused too (the wrapper is not looked into)."""

    def forward(self, x):
        if x.sum() > 0:
            x = shrink(x)
        return x


class Autocast(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self._block(x)

    @torch.autocast("cpu", dtype=torch.bfloat16)  # MARK
    def _block(self, x):
        if x.sum() > 0:
            return self.fc(x)
        return x


def _line_of(cls, marker: str = "MARK") -> int:
    lines, first = inspect.getsourcelines(cls)
    return first + next(i for i, text in enumerate(lines) if marker in text)


def test_a_decorated_forward_compiles_with_its_wrapper(tmp_path):
    """Before: refused at ``@add_one``'s line (the root forward's wrapper was not compiled). Now
    the root is compiled through a call of the decorated function (``rewriter.decorated_entry``)."""
    model = AddOneForward().eval()
    generator = torch.Generator().manual_seed(8)
    inputs = [torch.randn(1, 4, generator=generator) * (-1) ** i for i in range(8)]
    compiled = dycl.compile(model, inputs[0])
    assert compiled.stats["conditions"] >= 1
    assert assert_equivalent(model, compiled, inputs, atol=ATOL) >= 2
    report = run_host_without_torch(compiled.save(tmp_path / "net"), model, inputs, ATOL)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


@pytest.mark.parametrize(("model_class", "decorator"), [(Autocast, "@torch.autocast(\"cpu\", dtype=torch.bfloat16)")],
                         ids=["autocast"])
def test_decorator_that_changes_the_result_is_refused_at_its_line(model_class, decorator):
    torch.manual_seed(0)
    model = model_class().eval()
    with pytest.raises(dycl.UnsupportedError) as info:
        dycl.compile(model, torch.randn(1, 4))
    assert f"decorated with {decorator} (" in str(info.value)
    assert info.value.location is not None
    assert (info.value.location.path, info.value.location.line) == (__file__, _line_of(model_class))


def test_a_decorated_helper_compiles_with_its_wrapper(tmp_path):
    """A decorator on a helper is compiled as the closure it is (issue 27): ``shrink`` keeps its +1."""
    torch.manual_seed(0)
    model = AddOneFunction().eval()
    generator = torch.Generator().manual_seed(2)
    inputs = [torch.randn(1, 4, generator=generator) * (-1) ** i for i in range(8)]
    compiled = dycl.compile(model, inputs[0])
    assert assert_equivalent(model, compiled, inputs, atol=ATOL) >= 2
    report = run_host_without_torch(compiled.save(tmp_path / "net"), model, inputs, ATOL)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


@pytest.mark.parametrize("backend", ["onnxruntime", "torch"])
def test_a_decorated_helper_that_branches_on_data_is_inlined_with_its_wrapper(backend, tmp_path):
    """The wrapper's ``method(*args, **kwargs)`` gets the call's arguments as parameters of
    their own (``rewriter.forwarding``), so the method is inlined inside the wrapper: +1 kept."""
    torch.manual_seed(0)
    model = AddOneHelper().eval()
    generator = torch.Generator().manual_seed(4)
    inputs = [torch.randn(1, 4, generator=generator) * (-1) ** i for i in range(8)]
    compiled = dycl.compile(model, inputs[0], backend=backend)
    assert compiled.stats["conditions"] >= 1
    assert assert_equivalent(model, compiled, inputs, atol=ATOL) >= 2
    if backend == "onnxruntime":
        report = run_host_without_torch(compiled.save(tmp_path / "net"), model, inputs, ATOL)
        assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


def test_the_decorator_matters():
    """What compiling the undecorated method would have returned is wrong for every input."""
    torch.manual_seed(0)
    model = AddOneHelper().eval()
    with torch.no_grad():
        for x in (torch.randn(1, 4) for _ in range(4)):
            assert not torch.allclose(model(x), inspect.unwrap(AddOneHelper.gate)(model, model.fc(x)))


@pytest.mark.parametrize("backend", ["onnxruntime", "torch"])
def test_grad_mode_and_forwarding_decorators_compile(backend, tmp_path):
    torch.manual_seed(0)
    model = Harmless().eval()
    generator = torch.Generator().manual_seed(1)
    inputs = [torch.randn(1, 4, generator=generator) * s for s in (0.2, 1, 3) for _ in range(6)]
    compiled = dycl.compile(model, inputs[0], backend=backend)
    assert compiled.stats["conditions"] >= 2
    assert assert_equivalent(model, compiled, inputs, atol=ATOL) >= 3
    if backend == "onnxruntime":
        report = run_host_without_torch(compiled.save(tmp_path / "net"), model, inputs, ATOL)
        assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


def make_gate(threshold):
    def gate(self, x):  # MARK
        if x.sum() > threshold:
            return x * 2
        return x - 1

    return gate


class ClosureMethod(nn.Module):
    gate = make_gate(0.5)

    def forward(self, x):
        return self.gate(x) + 1


def test_a_method_reading_a_closure_compiles_with_the_cell_frozen():
    """Before: the free variable was unknown to the rewriter and compiling crashed with NameError;
    then it was refused; now the cell is read at compile time, as a global is (issue 27)."""
    model = ClosureMethod().eval()
    generator = torch.Generator().manual_seed(3)
    inputs = [torch.randn(1, 4, generator=generator) * (-1) ** i for i in range(8)]
    compiled = dycl.compile(model, inputs[0])
    assert assert_equivalent(model, compiled, inputs, atol=ATOL) >= 2

