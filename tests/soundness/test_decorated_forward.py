"""A decorated top-level ``forward`` compiles with its decorator (issues 27/28).

Before: ``@add_one def forward(self, x)`` was refused at the decorator's line, since the
rewriter parsed forward's own source and would have dropped the wrapper. Now the root is
compiled through a generated entry that calls the decorated function
(``rewriter.decorated_entry``), so the wrapper is inlined as any callee's is. Decorators as
people write them: ``functools.wraps`` or not, ``*args/**kwargs`` or named parameters, a
factory with arguments, stacked, tensor work before and after, a keyword that reaches the
wrapper in ``kwargs``. Each test counts the eager paths and compares in process and through
the torch-free host.
"""

from __future__ import annotations

import copy
import functools
import inspect

import pytest
import torch
import torch.nn as nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import Call, run_host_without_torch

ATOL = 1e-5


def add_one(method):
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        return method(*args, **kwargs) + 1

    return wrapper


def clamp_output(lo, hi):
    """A decorator factory with arguments."""
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(self, x, *args, **kwargs):
            return fn(self, x, *args, **kwargs).clamp(lo, hi)
        return wrapper
    return decorate


def standardize(fn):
    """Tensor work before and after; no functools.wraps (a plain closure)."""
    def inner(self, x):
        x = x - x.mean(dim=-1, keepdim=True)
        y = fn(self, x)
        if y.abs().max() > 2.0:  # the wrapper decides on data too
            y = y / 2
        return y * self.gain
    return inner


def scale_keyword(fn):
    """Reads and edits the call's kwargs, as transformers' wrappers do."""
    @functools.wraps(fn)
    def wrapper(self, x, **kwargs):
        if "mask" in kwargs and kwargs["mask"] is not None:
            kwargs["mask"] = kwargs["mask"] * 2.0
        return fn(self, x, **kwargs)
    return wrapper


class AddOne(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    @add_one
    def forward(self, x):
        h = self.fc(x)
        if h.sum() > 0:
            return h * 2
        return -h


class Stacked(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.gain = 1.5

    @clamp_output(-1.0, 3.0)
    @add_one
    @standardize
    def forward(self, x):
        h = self.fc(x)
        if h.mean() > 0:
            return torch.relu(h) * 3
        return h - 1


class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 5)

    @scale_keyword
    def forward(self, x, mask=None):
        h = self.fc(x)
        if mask is not None:
            h = h * mask
        if h.max() > 1.5:
            return h.softmax(-1)
        return h


def doubled(fn):
    """No functools.wraps, ``self`` then ``*args``: the signature compiled is the wrapper's."""
    def wrapper(self, *args, **kwargs):
        return fn(self, *args, **kwargs) * 2
    return wrapper


def hiding(fn):
    """No functools.wraps and no ``self``: forward's parameters are invisible."""
    def wrapper(*args, **kwargs):  # MARK
        return fn(*args, **kwargs) * 2
    return wrapper


class GradModeOverVariadic(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    @torch.no_grad()
    @doubled
    def forward(self, x):
        if x.sum() > 0:
            return self.fc(x)
        return x


class Hidden(nn.Module):
    @hiding
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x


class Partial(nn.Module):
    """forward set on the instance to a partial of a decorated method (the DyCL authors' SDN idiom)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.forward = functools.partial(self.run, scale=2.0)

    @add_one
    def run(self, x, scale=1.0):
        if x.sum() > 0:
            return self.fc(x) * scale
        return x


def hooked():
    """A decorated forward with a forward hook on the model: the hook sees the wrapper's output."""
    model = AddOne()
    model.register_forward_hook(lambda module, args, output: output * 3)
    return model


def _inputs(shape, seed, scales=(0.1, -0.5, 1.0, -2.0, 3.0), each=3):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator) * s for s in scales for _ in range(each)]


@pytest.mark.parametrize(("build", "shape", "paths"), [(AddOne, (1, 4), 2), (Stacked, (2, 6), 3),
                                                      (Partial, (1, 4), 2), (hooked, (1, 4), 2),
                                                      (GradModeOverVariadic, (1, 4), 2)],
                         ids=["add_one", "stacked", "partial", "hooked", "no_grad_over_variadic"])
def test_a_decorated_root_forward_compiles_with_its_decorators(build, shape, paths, tmp_path):
    """Before: refused at the decorator's line ('decorated with @add_one')."""
    torch.manual_seed(0)
    model = build().eval()
    inputs = _inputs(shape, 7)
    compiled = dycl.compile(model, inputs[0])
    assert compiled.stats["conditions"] >= paths - 1
    assert assert_equivalent(model, compiled, inputs, min_paths=paths, atol=ATOL) >= paths
    report = run_host_without_torch(compiled.save(tmp_path / "net"), model, inputs, ATOL)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


def test_the_root_decorator_matters():
    """Compiling forward's own source would be wrong: the wrapper changes every output."""
    torch.manual_seed(0)
    model = AddOne().eval()
    with torch.no_grad():
        for x in _inputs((1, 4), 3, each=1):
            assert not torch.allclose(model(x), AddOne.forward.__wrapped__(model, x))


def test_a_keyword_reaches_the_wrapper_in_kwargs(tmp_path):
    """``mask=`` given by keyword is in the wrapper's ``kwargs`` (its ``'mask' in kwargs`` folds) and
    is doubled there; the data-dependent branch of forward is kept."""
    torch.manual_seed(0)
    model = Masked().eval()
    generator = torch.Generator().manual_seed(11)
    calls = [Call((x,), {"mask": (torch.rand(3, 5, generator=generator) > 0.3).float()})
             for x in _inputs((3, 5), 12)]
    compiled = dycl.compile(model, calls[0].args, kwargs=calls[0].kwargs)
    taken = set()
    with torch.no_grad():
        for call in calls:
            expected = model(*call.args, **call.kwargs)
            taken.add(bool((model.fc(call.args[0]) * call.kwargs["mask"] * 2).max() > 1.5))
            torch.testing.assert_close(compiled(*call.args, **call.kwargs), expected, atol=ATOL, rtol=0)
    assert len(taken) == 2
    report = run_host_without_torch(compiled.save(tmp_path / "net"), model, calls, ATOL)
    assert report == {"checked": len(calls), "problems": [], "torch_loaded": False}


def test_a_wrapper_hiding_forwards_parameters_is_refused_at_its_line():
    """``def wrapper(*args, **kwargs)`` without functools.wraps: which argument is ``self`` cannot
    be told from the signature, so the model is refused where the wrapper is defined (not a crash)."""
    with pytest.raises(dycl.UnsupportedError) as info:
        dycl.compile(Hidden().eval(), torch.randn(1, 4))
    lines, first = inspect.getsourcelines(hiding)
    line = first + next(i for i, text in enumerate(lines) if "MARK" in text)
    assert "Hidden.forward decorated with a wrapper whose signature hides" in str(info.value)
    assert (info.value.location.path, info.value.location.line) == (__file__, line)
    assert "functools.wraps" in info.value.hint


def alternating(fn):
    """State in the wrapper: it reads a counter on the model, then writes it."""
    @functools.wraps(fn)
    def wrapper(self, x):
        if self.calls % 2 == 1:
            x = -x
        self.calls += 1
        return fn(self, x)
    return wrapper


class Smoothed(nn.Module):
    """A decorated forward writing module state itself (a running mean buffer) under a wrapper that
    writes state too: both are compiled as state, the counter read before the write not folded."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("running", torch.zeros(4))
        self.calls = 0

    @alternating
    @add_one
    def forward(self, x):
        self.running.mul_(0.9).add_(x.mean(0) * 0.1)
        if x.sum() > 0:
            return self.fc(x) + self.running
        return x - self.running


def test_state_written_by_a_decorated_forward_and_its_wrapper_compiles(tmp_path):
    """Before: refused at the decorator; the wrapper's ``self.calls += 1``, once the wrapper was
    compiled, was refused as 'not part of the model' (the prescan read only the innermost method)."""
    torch.manual_seed(0)
    model = Smoothed().eval()
    twin, host_twin = copy.deepcopy(model), copy.deepcopy(model)
    inputs = _inputs((2, 4), 21, each=2)
    compiled = dycl.compile(model, inputs[0])
    artifact = compiled.save(tmp_path / "net")
    paths = set()
    with torch.no_grad():
        for step, x in enumerate(inputs):
            paths.add((step % 2, bool((x if step % 2 == 0 else -x).sum() > 0)))
            torch.testing.assert_close(compiled(x), twin(x), atol=ATOL, rtol=0)
            assert model.calls == twin.calls == step + 1
            torch.testing.assert_close(model.running, twin.running, atol=ATOL, rtol=0)
    assert len(paths) == 4
    report = run_host_without_torch(artifact, host_twin, inputs, ATOL)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}
