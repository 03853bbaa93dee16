"""``**kwargs`` dicts whose keys the call site fixes (``rewriter.values.DictKeys``), imports
inside a function (``rewriter.local_imports``) and refusals that wait for constant
propagation (``rewriter.deferred_refusals``): the constructs that stopped library code such as
transformers' ``@deprecate_kwarg`` and ``@merge_with_config_defaults`` wrappers.

Each model agrees with eager on inputs taking several paths, in process and through the
torch-free host; a construct still reached for the call form is refused at its line."""

from __future__ import annotations

import functools
import warnings

import pytest
import torch
import torch.nn as nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch
from tests.rewriter.golden import after, golden

ATOL = 1e-5


def renamed_keyword(old: str, new: str):
    """``@deprecate_kwarg``-style: a call passing ``old=`` reaches the method as ``new=``."""
    def decorator(method):
        @functools.wraps(method)
        def wrapper(*args, **kwargs):
            if old in kwargs and new in kwargs:
                raise ValueError(f"both {old} and {new}: {kwargs[old]} {kwargs[new]}")
            elif old in kwargs:
                kwargs[new] = kwargs.pop(old)
            return method(*args, **kwargs)
        return wrapper
    return decorator


def with_default_gain(method):
    """Fills in a keyword the call left out, before forwarding the dict."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        kwargs.setdefault("gain", 3.0)
        if len(kwargs) > 1 and "trace" in kwargs:
            kwargs.pop("trace")
        return method(self, *args, **kwargs)
    return wrapper


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    @renamed_keyword("scale", "gain")
    def forward(self, x, gain=None):
        h = self.proj(x)
        if h.sum() > 0:
            h = h.relu()
        return h if gain is None else h * gain


class Defaulted(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    @with_default_gain
    def forward(self, x, gain=1.0):
        h = self.proj(x)
        if h.mean() > 0:
            return h * gain
        return h - gain


class Renames(nn.Module):
    """Calls one layer with the old keyword, one with the new one, one with neither, and a
    layer whose wrapper fills in a default: each must see the keywords Python passes."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c, self.d = Scaled(), Scaled(), Scaled(), Defaulted()

    def forward(self, x):
        s = x.abs().mean()
        h = self.a(x, scale=s)
        h = self.b(h, gain=s + 1)
        h = self.c(h)
        return self.d(h, trace=True) + self.d(h)


def _inputs(count: int = 16) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    return [torch.randn(1 + i % 3, 4, generator=generator) * (i % 5 - 2) for i in range(count)]


def test_keyword_renaming_and_filling_wrappers_compile_and_forward_the_edited_keywords(tmp_path):
    """``"scale" in kwargs`` is decided by the call site (the values are tensors); the wrapper's
    ``kwargs[new] = kwargs.pop(old)`` and ``setdefault`` change the dict that is forwarded, so
    the method gets ``gain=`` (forwarding the call's own keywords would drop the rename)."""
    torch.manual_seed(0)
    model = Renames().eval()
    compiled = dycl.compile(model, torch.randn(2, 4))
    inputs = _inputs()
    paths = assert_equivalent(model, compiled, inputs, min_paths=2, atol=ATOL)
    assert paths >= 4, paths  # four branches on data, each taken both ways by some input
    report = run_host_without_torch(compiled.save(tmp_path / "renames"), model, inputs, atol=ATOL)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


class Options(nn.Module):
    """A helper taking options as ``**kwargs``, the way training scripts pass them on."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(4)
        self.proj = nn.Linear(4, 4)

    def _block(self, x, **options):
        if "shift" in options:
            x = x + options["shift"]
        scale = options.get("scale", 1.0)
        if options.get("normalize", False):
            x = self.norm(x)
        extra = {**options, "residual": x}
        if len(extra) > 2 and x.amax() > 1.2:
            return self.proj(x) * scale + extra["residual"]
        return self.proj(x) * scale

    def forward(self, x):
        h = self._block(x, shift=x.mean(), normalize=True)
        return self._block(h, scale=x.std())


def test_membership_get_and_len_of_a_kwargs_dict_with_tensor_values_are_static(tmp_path):
    torch.manual_seed(1)
    model = Options().eval()
    compiled = dycl.compile(model, torch.randn(2, 4))
    inputs = _inputs()
    paths = assert_equivalent(model, compiled, inputs, min_paths=2, atol=ATOL)
    assert paths == 2, paths  # the first call's return on data, either way
    # every key test folded: the second call's ``len(extra) > 2`` is False, so only the first decides on data
    assert compiled.stats["conditions"] == 1, compiled.stats
    report = run_host_without_torch(compiled.save(tmp_path / "options"), model, inputs, atol=ATOL)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


class LazyImports(nn.Module):
    """Imports inside forward() of modules already loaded, and a debugging branch that the
    configuration turns off: its state write and its ``with`` are never reached."""

    def __init__(self, debug: bool = False):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.debug = debug
        self.heads = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x):
        import math

        from torch.nn import functional as F

        h = self.proj(x) * math.sqrt(2.0)
        chosen = [i for i, head in enumerate(self.heads) if i != 1]
        for i in chosen:
            if h.sum() > 0:
                h = F.gelu(self.heads[i](h)) - 0.1
        if self.debug:
            self.register_buffer("last", h)  # MARK-WRITE
            with warnings.catch_warnings():  # MARK-WITH
                warnings.simplefilter("ignore")
        return h


def test_loaded_imports_comprehensions_and_dead_debugging_code_compile(tmp_path):
    torch.manual_seed(2)
    model = LazyImports().eval()
    compiled = dycl.compile(model, torch.randn(2, 4))
    inputs = _inputs()
    paths = assert_equivalent(model, compiled, inputs, min_paths=2, atol=ATOL)
    assert paths == 2, paths  # the first head's test either way (the second goes one way on these inputs)
    report = run_host_without_torch(compiled.save(tmp_path / "imports"), model, inputs, atol=ATOL)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


def test_a_state_write_still_reached_is_refused_at_its_line():
    """With ``debug=True`` the buffer forward() would register is reached: refused
    as before, at its own line (not a crash, not a silent write while tracing)."""
    model = LazyImports(debug=True).eval()
    with pytest.raises(dycl.UnsupportedError, match="a write to module state") as info:
        dycl.compile(model, torch.randn(2, 4))
    assert "MARK-WRITE" in info.value.location.source_line()


class WithOnly(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.quiet = True

    def forward(self, x):
        h = self.proj(x)
        if self.quiet:
            with warnings.catch_warnings():  # MARK
                h = h.relu()
        return h


def test_a_with_statement_still_reached_is_refused_at_its_line():
    with pytest.raises(dycl.UnsupportedError, match="with statement") as info:
        dycl.compile(WithOnly().eval(), torch.randn(2, 4))
    assert "MARK" in info.value.location.source_line()


class RenamesOnce(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = Scaled()

    def forward(self, x):
        return self.layer(x, scale=x.mean())


def test_golden_the_key_tests_fold_and_the_edited_dict_is_forwarded_by_key():
    """Before: ``if old in kwargs and new in kwargs: raise ...; elif old in kwargs:
    kwargs[new] = kwargs.pop(old); return method(*args, **kwargs)``. After constant
    propagation only the rename is left, and the method receives ``gain=kwargs['gain']``."""
    assert after(RenamesOnce().eval(), "constprop") == golden("""
        kwargs_scale = x.mean()
        kwargs = {'scale': kwargs_scale}
        kwargs[new] = kwargs.pop(old)
        gain = kwargs['gain']
        h = self.layer.proj(x)
        if h.sum() > 0:
            h = h.relu()
        return h if gain is None else h * gain
    """)


class KeysThatChange(nn.Module):
    """Key sets changed through an alias, on one path only (a decision on data), and by a
    function the dict is handed to: each later membership test must see what Python sees."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def _step(self, x, **options):
        alias = options
        alias.pop("scale")
        h = self.proj(x)
        if "scale" in options:  # never: the alias removed it
            h = h * 100.0
        if x.sum() > 0:
            options.pop("bias")
        if "bias" in options:  # decided on the host: the pop above ran on one path only
            h = h + options["bias"]
        dict.pop(options, "bias", None)
        if "bias" in options:  # never: the call removed it
            h = h - 100.0
        return h

    def forward(self, x):
        return self._step(x, scale=x.mean(), bias=x.std())


def test_keys_changed_through_aliases_on_one_path_or_by_a_helper_are_not_folded_wrongly(tmp_path):
    torch.manual_seed(4)
    model = KeysThatChange().eval()
    compiled = dycl.compile(model, torch.randn(2, 4))
    inputs = _inputs()
    paths = assert_equivalent(model, compiled, inputs, min_paths=2, atol=ATOL)
    assert paths == 2, paths  # the pop on data, taken or not (the membership test after it follows it)
    report = run_host_without_torch(compiled.save(tmp_path / "keys"), model, inputs, atol=ATOL)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}
