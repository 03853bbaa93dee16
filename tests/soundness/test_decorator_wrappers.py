"""Decorators written the way people write them compile as the closures they are (issue 27).

A wrapper that forwards ``*args, **kwargs`` to the function it wraps (``functools.wraps``
or not, ``self`` first or not, made by a factory such as ``@scaled(0.5)``, stacked, doing
work on the tensor before and after) is inlined together with that function, so a decision
on data inside the function becomes a condition of the graph instead of a refusal. Each test
counts the eager paths its inputs take and compares in process and through the torch-free host.
"""

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


def squash(fn):
    @functools.wraps(fn)
    def wrapper(self, x, *args, **kwargs):
        return torch.tanh(fn(self, x, *args, **kwargs)) + 0.1
    return wrapper


def scaled(factor):
    """A decorator factory: ``@scaled(0.5)``."""
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs) * factor
        return wrapper
    return decorate


def normalized(fn):
    """Pre- and post-work on the tensor; no ``functools.wraps``."""
    def inner(self, x, *args, **kwargs):
        x = (x - x.mean(dim=-1, keepdim=True)) / (x.std(dim=-1, keepdim=True) + 1e-5)
        out = fn(self, x, *args, **kwargs)
        return out.clamp(-3.0, 3.0)
    return inner


@scaled(0.5)
def route(x, mode="relu", offset=0):
    """A decorated free function called with a static string and int."""
    if x.amax() > 1.0:
        x = torch.relu(x) if mode == "relu" else torch.sigmoid(x)
    return x + offset


class Blocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.proj = nn.Linear(6, 6)

    @squash
    def _stage(self, x, depth, scale=1.0):
        for _ in range(depth):
            x = self.fc(x)
        if x.mean() > 0:
            return x * scale
        return -x

    @scaled(2.0)
    @normalized
    def _mix(self, x, h, alpha=0.5, kind="add"):
        if x.sum() > h.sum():
            return self.proj(x) + alpha * h if kind == "add" else x * h
        return h - x

    def forward(self, x):
        h = self._stage(x, 2, scale=0.5)
        h = self._stage(h, 1)
        y = self._mix(x, h, alpha=0.25)
        y = route(y, "sigmoid", offset=1) + route(h)
        return y


@pytest.mark.parametrize("backend", ["onnxruntime", "torch"])
def test_wrappers_forwarding_packs_are_inlined_with_what_they_wrap(backend, tmp_path):
    """Static extras (ints, a float keyword, strings) and a tensor pass through ``*args``/
    ``**kwargs``; factories, stacking, no ``functools.wraps``, a free function: every wrapped
    decision is a condition (before: 'bool() of a tensor inside code exported as one graph')."""
    torch.manual_seed(0)
    model = Blocks().eval()
    generator = torch.Generator().manual_seed(5)
    inputs = [torch.randn(3, 6, generator=generator) * s for s in (0.1, -0.5, 1.0, -2.0, 3.0) for _ in range(4)]
    compiled = dycl.compile(model, inputs[0], backend=backend)
    assert compiled.stats["conditions"] >= 4
    assert assert_equivalent(model, compiled, inputs, min_paths=4, atol=ATOL) >= 4
    if backend == "onnxruntime":
        report = run_host_without_torch(compiled.save(tmp_path / "net"), model, inputs, ATOL)
        assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


def gated(block, x):
    if x.sum() > 0:
        return block(x)
    return -x


class SharedHelper(nn.Module):
    """A branching helper taking a submodule, called from a method inlined twice with different
    static arguments: each inlining reads the submodule through its own receiver."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def _stage(self, x, k):
        return gated(self.fc, x) * k

    def forward(self, x):
        return self._stage(x, 1) + self._stage(x + 1, 2)


def test_a_helper_cached_for_one_receiver_is_not_reused_for_another(tmp_path):
    """Before: the second ``_stage`` reused ``gated``'s body rewritten for the first one, which
    read ``self.fc`` through the first receiver's placeholder: NameError 'receiver' (the cause of
    the backed-out decorator inlining, fuzz seed 77)."""
    torch.manual_seed(0)
    model = SharedHelper().eval()
    generator = torch.Generator().manual_seed(6)
    inputs = [torch.randn(2, 6, generator=generator) * 0.3 + c for c in (-2.0, -0.5, 0.5) for _ in range(3)]
    compiled = dycl.compile(model, inputs[0])
    assert assert_equivalent(model, compiled, inputs, min_paths=3, atol=ATOL) >= 3
    report = run_host_without_torch(compiled.save(tmp_path / "net"), model, inputs, ATOL)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


def with_defaults(fn):
    @functools.wraps(fn)
    def wrapper(self, x, *args, **kwargs):
        kwargs.setdefault("scale", 3.0)
        return fn(self, x, *args, **kwargs)
    return wrapper


def forcing(fn):
    @functools.wraps(fn)
    def wrapper(self, x, *args, **kwargs):
        kwargs["shift"] = 2.0
        kwargs.pop("unused", None)
        return fn(self, x, *args, **kwargs)
    return wrapper


def extending(fn):
    @functools.wraps(fn)
    def wrapper(self, x, *args, **kwargs):
        args = args + (5,)
        return fn(self, x, *args, **kwargs)
    return wrapper


class EditedPacks(nn.Module):
    """Wrappers that change the packs before forwarding them: each change matters to the result."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    @with_defaults
    def _a(self, x, scale=1.0):
        if x.sum() > 0:
            return self.fc(x) * scale
        return x

    @forcing
    def _b(self, x, shift=0.0):
        if x.mean() > 0.1:
            return x + shift
        return -x

    @extending
    def _c(self, x, k, m=0):
        if x.mean() > 0.0:
            return x * k + m
        return x

    def forward(self, x):
        y = self._a(x)
        z = self._b(y, unused=1)
        return self._c(z, 2)


def test_a_wrapper_may_change_the_packs_it_forwards(tmp_path):
    """The ``**kwargs`` dict is the call's own (before: 'a change to a dict that outlives the
    call'); ``setdefault``, an item write, ``pop`` and ``args + (5,)`` reach the wrapped method."""
    torch.manual_seed(0)
    model = EditedPacks().eval()
    generator = torch.Generator().manual_seed(1)
    inputs = [torch.randn(2, 6, generator=generator) * s for s in (0.1, -1.0, 2.0, -3.0) for _ in range(4)]
    compiled = dycl.compile(model, inputs[0])
    assert compiled.stats["conditions"] >= 3
    assert assert_equivalent(model, compiled, inputs, min_paths=3, atol=ATOL) >= 3
    report = run_host_without_torch(compiled.save(tmp_path / "net"), model, inputs, ATOL)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


class Fused(nn.Module):
    """Features gathered in a list by a loop and passed on as ``*feats``; a pair list likewise."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(6, 6) for _ in range(3)])

    def _fuse(self, low, mid, high, scale=1.0):
        out = low
        if mid.sum() > out.sum():
            out = out + mid
        if high.sum() > out.sum():
            out = out + high
        return out * scale

    def _pick(self, a, b):
        if a.mean() > b.mean():
            return a
        return b - a

    def forward(self, x):
        feats = []
        for block in self.blocks:
            x = block(x)
            feats.append(x)
        y = self._fuse(*feats, scale=0.5)
        pair = [y, feats[0]]
        return self._pick(*pair)


def test_a_list_of_tensors_of_known_length_is_spread_into_the_call(tmp_path):
    """Before: ``self._fuse(*feats)`` stayed a call exported as one graph and its ``if`` was refused."""
    torch.manual_seed(0)
    model = Fused().eval()
    generator = torch.Generator().manual_seed(1)
    inputs = [torch.randn(2, 6, generator=generator) * s for s in (0.1, -1.0, 2.0, -3.0) for _ in range(4)]
    compiled = dycl.compile(model, inputs[0])
    assert compiled.stats["conditions"] >= 3
    assert assert_equivalent(model, compiled, inputs, min_paths=3, atol=ATOL) >= 3
    report = run_host_without_torch(compiled.save(tmp_path / "net"), model, inputs, ATOL)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


class doubled:  # a decorator, named as one
    """A class-based decorator: the instance replaces the function, its ``__call__`` wraps it."""

    def __init__(self, fn):
        functools.update_wrapper(self, fn)
        self.fn = fn

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs) * 2


@doubled
def rectify(x, floor=0.0):
    if x.sum() > floor:
        return x
    return -x


class ClassDecorated(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x):
        return rectify(self.fc(x), floor=0.5)


def test_a_class_based_decorator_is_inlined_through_its_call_method(tmp_path):
    """Before: the instance was an opaque callable, exported as one graph with its ``if`` refused."""
    torch.manual_seed(0)
    model = ClassDecorated().eval()
    generator = torch.Generator().manual_seed(2)
    inputs = [torch.randn(2, 6, generator=generator) * s for s in (0.1, -1.0, 2.0, -3.0) for _ in range(4)]
    compiled = dycl.compile(model, inputs[0])
    assert compiled.stats["conditions"] >= 1
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=ATOL) >= 2
    report = run_host_without_torch(compiled.save(tmp_path / "net"), model, inputs, ATOL)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


class counting:  # a decorator, named as one
    def __init__(self, fn):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.calls = 0

    def __call__(self, *args, **kwargs):
        self.calls += 1  # MARK
        return self.fn(*args, **kwargs) * self.calls


@counting
def counted_gate(x):
    if x.sum() > 0:
        return x
    return -x


class CountingDecorated(nn.Module):
    def forward(self, x):
        return counted_gate(x)


def test_a_class_based_decorator_that_keeps_state_is_refused_at_its_write():
    """Its result changes with every call: the write to the decorator's own attribute is refused
    at its line (freezing it would silently give the first call's result every time)."""
    with pytest.raises(dycl.UnsupportedError) as info:
        dycl.compile(CountingDecorated().eval(), torch.randn(2, 6))
    assert "self.calls" in str(info.value)
    lines, first = inspect.getsourcelines(counting)
    assert info.value.location.line == first + next(i for i, text in enumerate(lines) if "MARK" in text)
