"""Constructs people write in forward() that dycl compiles instead of refusing (issue 27),
each in a model written the way its authors write it, compared with eager on inputs that
take several paths, in-process and as a torch-free host."""

from __future__ import annotations

import functools

import torch
from torch import nn
from torch.nn import functional as F

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch


def varied(*shape: int, count: int, seed: int) -> list[torch.Tensor]:
    """Inputs of several scales and signs, so that data-dependent tests go both ways."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator) * (0.1 + i % 4) * (-1) ** (i // 2) for i in range(count)]


def agree(model: nn.Module, example, inputs, tmp_path, atol: float = 1e-5, **options) -> int:
    """Compile ``model``; assert it agrees with eager in-process and as a torch-free host on
    ``inputs``; the number of distinct eager paths they took."""
    compiled = dycl.compile(model, example, **options)
    paths = assert_equivalent(model, compiled, inputs, min_paths=2, atol=atol)
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, inputs, atol)
    assert report["checked"] == len(inputs) and not report["problems"], report
    return paths


# -- try/except/finally -----------------------------------------------------------------------------


class InternalClassifier(nn.Module):
    """The shape of ShallowDeep-Nets' internal classifiers (``adNN/ShallowDeep/aux_funcs.py``
    in the DyCL authors' code): the forward chosen in __init__, a try around the linear head."""

    def __init__(self, channels: int, classes: int) -> None:
        super().__init__()
        self.max_pool = nn.AdaptiveMaxPool2d(2)
        self.avg_pool = nn.AdaptiveAvgPool2d(2)
        self.alpha = nn.Parameter(torch.rand(1))
        self.linear = nn.Linear(channels * 4, classes)
        self.forward = self.forward_w_pooling

    def forward_w_pooling(self, x):
        avgp = self.alpha * self.max_pool(x)
        maxp = (1 - self.alpha) * self.avg_pool(x)
        mixed = avgp + maxp
        try:
            return self.linear(mixed.reshape(mixed.size(0), -1))
        except:  # noqa: E722 - as the authors wrote it
            print()


class ShallowDeep(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stages = nn.ModuleList([nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU()),
                                     nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())])
        self.exits = nn.ModuleList([InternalClassifier(8, 5), InternalClassifier(8, 5)])
        self.confidence_threshold = 0.27

    def forward(self, x):
        for layer, head in zip(self.stages, self.exits):
            x = layer(x)
            out = head(x)
            try:
                confidence = F.softmax(out, dim=1).max()
            finally:
                pass
            if confidence >= self.confidence_threshold:
                return out, True
        return out, False


def test_try_around_a_linear_head_compiles(tmp_path):
    torch.manual_seed(0)
    model = ShallowDeep().eval()
    inputs = varied(1, 3, 8, 8, count=12, seed=3)
    assert agree(model, inputs[0], inputs, tmp_path) >= 2


class GuardedNorm(nn.Module):
    """try/except/else/finally in a helper, around tensor code."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(6, 6)

    def _normalise(self, h):
        try:
            scale = h.norm(dim=-1, keepdim=True)
        except RuntimeError as error:
            raise ValueError("bad activation") from error
        else:
            h = h / (scale + 1e-6)
        finally:
            h = h.clamp(-1, 1)
        return h

    def forward(self, x):
        h = self._normalise(self.proj(x))
        if h.sum() > 0:
            return h * 2
        return h - 1


def test_try_except_else_finally_in_a_helper(tmp_path):
    torch.manual_seed(1)
    model = GuardedNorm().eval()
    inputs = varied(3, 6, count=12, seed=4)
    assert agree(model, inputs[0], inputs, tmp_path) >= 2


# -- loops bounded by a counter ---------------------------------------------------------------------


class Refiner(nn.Module):
    """Iterative refinement until the update is small, at most ``max_iters`` times."""

    def __init__(self, max_iters: int = 4) -> None:
        super().__init__()
        self.update = nn.Linear(8, 8)  # a submodule named like dict.update
        self.max_iters = max_iters
        self.tol = 0.6

    def forward(self, x):
        steps = 0
        delta = self.update(x)
        while delta.abs().mean() > self.tol and steps < self.max_iters:
            x = 0.6 * x - 0.1 * delta
            delta = self.update(x)
            steps += 1
        return x, steps


def test_while_with_a_tensor_test_and_a_counter(tmp_path):
    torch.manual_seed(2)
    model = Refiner().eval()
    inputs = [x * 3 for x in varied(2, 8, count=16, seed=5)]
    assert agree(model, inputs[0], inputs, tmp_path) >= 3


class Halting(nn.Module):
    """A halting loop: counter bound, tensor condition as a break."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.GRUCell(6, 6)
        self.halt = nn.Linear(6, 1)

    def forward(self, x):
        h = torch.zeros_like(x)
        n = 0
        while n < 3:
            h = self.cell(x, h)
            n += 1
            if torch.sigmoid(self.halt(h)).mean() > 0.6:
                break
        return h


def test_while_counter_with_a_tensor_break(tmp_path):
    torch.manual_seed(3)
    model = Halting().eval()
    inputs = [x * 3 for x in varied(1, 6, count=16, seed=6)]
    assert agree(model, inputs[0], inputs, tmp_path) >= 2


# -- static type tests --------------------------------------------------------------------------------


class LSTMClassifier(nn.Module):
    """Type tests on what a recurrent layer returns, and on an input."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(8, 8, batch_first=True)
        self.head = nn.Linear(8, 3)

    def forward(self, tokens):
        if not isinstance(tokens, torch.Tensor):
            tokens = torch.as_tensor(tokens)
        out = self.lstm(tokens)
        if isinstance(out, tuple):
            out, (h_n, _) = out
        else:
            h_n = None
        feats = out[:, -1]
        if h_n is not None and type(h_n) is torch.Tensor:
            feats = feats + h_n[-1]
        logits = self.head(feats)
        if logits.max() > 0.3:
            return logits.softmax(-1)
        return logits


def test_isinstance_on_an_rnn_output_is_folded(tmp_path):
    torch.manual_seed(4)
    model = LSTMClassifier().eval()
    inputs = [x * 2 for x in varied(1, 5, 8, count=12, seed=7)]
    assert agree(model, inputs[0], inputs, tmp_path) >= 2


class OptionalState(nn.Module):
    """``x is None`` and ``hasattr`` on locals whose type the path fixes."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.GRUCell(4, 4)
        self.gate = nn.Linear(4, 1)

    def forward(self, x):
        state = None
        if self.gate(x).mean() > 0:
            state = self.cell(x)
        if state is None:
            return x * 0.5
        if hasattr(state, "shape") and state is not None:
            return state + x
        return x


def test_is_none_on_a_local_assigned_on_one_path(tmp_path):
    torch.manual_seed(5)
    model = OptionalState().eval()
    inputs = varied(1, 4, count=12, seed=8)
    assert agree(model, inputs[0], inputs, tmp_path) >= 2


# -- data-dependent raise and assert --------------------------------------------------------------------


class ValidatingScorer(nn.Module):
    """Input validation and a sanity assert, as people guard a model in production."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 6), nn.ReLU())
        self.score = nn.Linear(6, 2)

    def forward(self, x):
        if not torch.isfinite(x).all():
            raise ValueError("input contains NaN or Inf")
        h = self.body(x)
        logits = self.score(h)
        assert logits.abs().max() < 1e3, "logits exploded"
        if logits[:, 0].mean() > logits[:, 1].mean():
            return logits, "first"
        return logits.flip(-1), "second"


def raised(call, *args) -> tuple[type, str]:
    try:
        call(*args)
    except Exception as error:  # noqa: BLE001 - the exception is what is compared
        return type(error), str(error).splitlines()[0]  # pytest adds its explanation to an assert's message
    raise AssertionError("no exception")


def test_data_dependent_raise_and_assert_are_raised_by_the_host(tmp_path):
    torch.manual_seed(6)
    model = ValidatingScorer().eval()
    inputs = varied(2, 6, count=12, seed=9)
    compiled = dycl.compile(model, inputs[0])
    assert agree(model, inputs[0], inputs, tmp_path) >= 2
    host = dycl.load(compiled.save(tmp_path / "raising"))
    nan = inputs[1].clone()
    nan[0, 3] = float("nan")
    expected = (ValueError, "input contains NaN or Inf")
    for bad in (nan, inputs[2] * float("inf")):
        assert raised(model, bad) == expected
        assert raised(compiled, bad) == expected
        assert raised(host, bad.numpy()) == expected
    huge = torch.full((2, 6), 1e6)  # finite, but the logits explode
    expected = (AssertionError, "logits exploded")
    assert raised(model, huge) == expected
    assert raised(compiled, huge) == expected
    assert raised(host, huge.numpy()) == expected


# -- super() ------------------------------------------------------------------------------------------


class SkippableBlock(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.gate = nn.Linear(width, 1)

    def forward(self, x):
        if torch.sigmoid(self.gate(x)).mean() < 0.5:
            return x
        return x + torch.relu(self.fc(x))

    def summary(self, x):
        return x.mean(-1, keepdim=True)


class NormedBlock(SkippableBlock):
    """A subclass that wraps its parent's forward, with a data-dependent branch inside it."""

    def __init__(self, width: int) -> None:
        super().__init__(width)
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        out = super().forward(self.norm(x))
        return out - super().summary(out)


class MaskedLinear(nn.Linear):
    """A library layer subclassed: its forward (torch code) stays one call."""

    def __init__(self) -> None:
        super().__init__(6, 6)
        self.register_buffer("mask", (torch.arange(6) % 2).float())

    def forward(self, x):
        return super().forward(x * self.mask)


class SuperNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = MaskedLinear()
        self.blocks = nn.ModuleList([NormedBlock(6) for _ in range(2)])

    def forward(self, x):
        h = self.inp(x)
        for block in self.blocks:
            h = block(h)
        return h


def test_super_forward_and_super_method_in_subclasses(tmp_path):
    torch.manual_seed(7)
    model = SuperNet().eval()
    inputs = varied(2, 6, count=16, seed=10)
    assert agree(model, inputs[0], inputs, tmp_path) >= 2


# -- recursion with a static depth --------------------------------------------------------------------


class TreeRefiner(nn.Module):
    """A recursive helper whose depth is a static argument, with a data-dependent step."""

    def __init__(self, depth: int = 3) -> None:
        super().__init__()
        self.step = nn.Linear(5, 5)
        self.depth = depth

    def _refine(self, x, depth):
        if depth == 0:
            return x
        h = self.step(x)
        if h.norm() > x.norm():
            h = h * 0.5
        return self._refine(h, depth - 1)

    def forward(self, x):
        return self._refine(x, self.depth)


def test_recursion_with_a_static_depth(tmp_path):
    torch.manual_seed(8)
    model = TreeRefiner().eval()
    inputs = varied(2, 5, count=16, seed=11)
    assert agree(model, inputs[0], inputs, tmp_path) >= 2


# -- walrus, lambdas on self, functions as arguments ----------------------------------------------------


def soft_threshold(t, tau=0.1):
    return torch.sign(t) * torch.clamp(t.abs() - tau, min=0)


class AttentionPool(nn.Module):
    """Activations chosen in __init__ (a lambda, a module-level function), the walrus in tests."""

    def __init__(self, activation: str = "clamp") -> None:
        super().__init__()
        self.proj = nn.Linear(6, 6)
        self.act = (lambda t: t.clamp(min=0)) if activation == "clamp" else torch.tanh
        self.shrink = soft_threshold

    def _gated(self, fn, h):
        if (energy := h.pow(2).mean()) > 0.01:
            return fn(h) / energy.sqrt()
        return fn(h)

    def forward(self, x):
        h = self.act(self.proj(x))
        if (total := h.sum()) > 4:
            h = h / total
        return self._gated(self.shrink, h)


def test_walrus_and_functions_stored_on_self(tmp_path):
    torch.manual_seed(9)
    model = AttentionPool().eval()
    inputs = varied(3, 6, count=16, seed=12)
    assert agree(model, inputs[0], inputs, tmp_path) >= 3


# -- generator helpers ------------------------------------------------------------------------------------


class MultiScale(nn.Module):
    """A feature generator consumed by a for loop and by sum()."""

    def __init__(self) -> None:
        super().__init__()
        self.stages = nn.ModuleList([nn.Linear(6, 6) for _ in range(3)])
        self.head = nn.Linear(6, 2)

    def _features(self, x):
        for stage in self.stages:
            x = torch.relu(stage(x))
            yield x

    def forward(self, x):
        best = None
        for h in self._features(x):
            if best is None or h.mean() > 0.4 * best.mean():
                best = h
        pooled = sum(self._features(x)) / 3
        return self.head(best + pooled)


def test_a_generator_helper_consumed_in_forward(tmp_path):
    torch.manual_seed(10)
    model = MultiScale().eval()
    inputs = varied(2, 6, count=16, seed=13)
    assert agree(model, inputs[0], inputs, tmp_path) >= 2


# -- decorators compiled as the closures they are -------------------------------------------------------


def doubled(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) * 2
    return wrapper


def clipped(limit):
    def decorate(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            out = fn(*args, **kwargs)
            return out.clamp(-limit, limit)
        return inner
    return decorate


class DecoratedHelpers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(6, 6)
        self.mix = nn.Linear(6, 6)
        scale = 0.5
        self.damp = lambda t: t * scale  # a closure made in __init__

    @doubled
    def _embed(self, x):
        return self.stem(x)

    @clipped(0.75)
    def _mix(self, h, *, residual=True):
        out = self.mix(h)
        return out + h if residual else out

    def forward(self, x):
        h = self._embed(x)
        if h.mean() > 0:
            h = self._mix(h, residual=False)
        else:
            h = self.damp(self._mix(h))
        return h


def test_decorated_helpers_keep_their_wrappers_code(tmp_path):
    torch.manual_seed(11)
    model = DecoratedHelpers().eval()
    inputs = varied(2, 6, count=16, seed=14)
    assert agree(model, inputs[0], inputs, tmp_path) >= 2


# -- **kwargs carrying tensors ---------------------------------------------------------------------------


class FiLM(nn.Module):
    """A submodule whose forward takes its conditioning through **kwargs."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(6, 6)

    def forward(self, x, **conditioning):
        h = self.body(x)
        if conditioning.get("gamma") is not None:
            h = h * conditioning["gamma"]
        if "beta" in conditioning and h.mean() > 0:
            h = h + conditioning["beta"]
        return h


class Conditioned(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.film = FiLM()
        self.to_gamma = nn.Linear(6, 6)

    def _shift(self, h, **kwargs):
        if kwargs.get("offset") is not None:
            h = h + kwargs["offset"]
        if "scale" in kwargs and h.sum() > 0:
            h = h * kwargs["scale"]
        return h

    def _modulate(self, x, **kwargs):
        return self.film(x, **kwargs)

    def forward(self, x):
        gamma = torch.sigmoid(self.to_gamma(x))
        h = self._modulate(x, gamma=gamma, beta=x * 0.1)
        h = self._shift(h, scale=gamma)
        return self._shift(self.film(h, beta=-h), offset=x)


def test_kwargs_carrying_tensors_into_a_helper_and_forwarded_to_a_submodule(tmp_path):
    torch.manual_seed(12)
    model = Conditioned().eval()
    inputs = varied(2, 6, count=16, seed=15)
    assert agree(model, inputs[0], inputs, tmp_path) >= 2
