"""Golden before/after snippets for ``Inline`` on decorated helpers: the wrapper is inlined as
the closure it is, and the call it makes with ``*args``/``**kwargs`` is spread into plain
arguments (``rewriter.star_arguments``), so the wrapped function is inlined inside it."""

from __future__ import annotations

import functools

import torch
from torch import nn

from dycl import rewriter
from tests.rewriter.golden import after, golden


def squash(fn):
    @functools.wraps(fn)
    def wrapper(self, x, *args, **kwargs):
        return torch.tanh(fn(self, x, *args, **kwargs)) + 0.1
    return wrapper


class Squashed(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])

    @squash
    def _stage(self, x, k, scale=1.0):
        if x.sum() > 0:
            x = self.layers[k](x) * scale
        return x

    def forward(self, x):
        return self._stage(x, 1, scale=0.5)


def test_a_wrapper_forwarding_static_packs_is_inlined_with_the_method():
    """``args == (1,)``, ``kwargs == {"scale": 0.5}``: the method's index and factor fold."""
    assert after(Squashed().eval(), "inline") == golden("""
        kwargs = {'scale': 0.5}
        x_2 = x
        if x_2.sum() > 0:
            x_2 = self.layers[1](x_2) * 0.5
        out = x_2
        return torch.tanh(out) + 0.1
    """)


def scaled(factor):
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs) * factor
        return wrapper
    return decorate


def clamped(fn):
    def inner(x, *args, **kwargs):
        return fn(x.clamp(-2, 2), *args, **kwargs)
    return inner


@scaled(0.5)
@clamped
def route(x, h, mode="relu"):
    if x.amax() > 1.0:
        x = torch.relu(x) if mode == "relu" else torch.sigmoid(x)
    return x + h


@scaled(2.0)
def widen(x):
    if x.sum() > 0:
        return x
    return -x


class Routed(nn.Module):
    def forward(self, x):
        h = x.mean(dim=0)
        return widen(route(x, h, mode="sigmoid"))


def test_stacked_factory_decorators_on_free_functions_keep_each_cell():
    """Two ``scaled`` wrappers, each reading its own ``factor`` cell (two globals), a wrapper
    without ``functools.wraps`` doing work on the tensor first, a tensor passed through ``*args``."""
    assert after(Routed().eval(), "inline") == golden("""
        h = x.mean(dim=0)
        x_3 = x.clamp(-2, 2)
        if x_3.amax() > 1.0:
            x_3 = torch.sigmoid(x_3)
        out_1 = x_3 + h
        out_2 = out_1 * factor_1
        if out_2.sum() > 0:
            out = out_2
        else:
            out = -out_2
        return out * factor
    """)


def halve(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) * 0.5
    return wrapper


class Halved(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    @halve
    def _bias(self, k, sign=1):
        if self.fc.bias.sum() > 0:
            return self.fc.bias * k * sign
        return self.fc.bias

    def forward(self, x):
        return x + self._bias(3, sign=-1)


def test_a_pack_of_the_receiver_and_literals_reads_the_receiver_itself():
    """``args == (self, 3)``, all static: the method's ``self`` is read as ``self``, not as
    ``(self, 3)[0]`` (``star_arguments._item_term``)."""
    assert after(Halved().eval(), "inline") == golden("""
        kwargs = {'sign': -1}
        if self.fc.bias.sum() > 0:
            out = self.fc.bias * 3 * -1
        else:
            out = self.fc.bias
        out_1 = out * 0.5
        return x + out_1
    """)


class Pyramid(nn.Module):
    """Features collected in a local list, then passed on with ``*feats`` (an FPN's fuse step)."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])

    def _fuse(self, low, high, scale=1.0):
        if high.sum() > low.sum():
            return (low + high) * scale
        return low

    def forward(self, x):
        feats = []
        for block in self.blocks:
            x = block(x)
            feats.append(x)
        return self._fuse(*feats, scale=0.5)


def test_a_local_list_of_known_length_is_spread_into_its_elements():
    """``feats`` holds two tensors (a ``ListLength``): ``*feats`` is ``feats[0], feats[1]``."""
    assert after(Pyramid().eval(), "inline") == golden("""
        feats = []
        block = self.blocks[0]
        x = block(x)
        feats.append(x)
        block = self.blocks[1]
        x = block(x)
        feats.append(x)
        low = feats[0]
        high = feats[1]
        if high.sum() > low.sum():
            return (low + high) * 0.5
        else:
            return low
    """)


class SquashedForward(nn.Module):
    """The root forward decorated (``rewriter.decorated_entry``): before, refused at ``@squash``."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    @squash
    def forward(self, x, scale=1.0):
        if x.sum() > 0:
            x = self.fc(x) * scale
        return x


def test_a_decorated_root_forward_is_inlined_inside_its_wrapper():
    """Before: ``def forward(self, x, scale=1.0): return SquashedForward_forward(self, x, scale=scale)``
    (the generated entry; ``scale`` passed by keyword, as the example passed it). After: the
    wrapper's tanh around the method's body, ``scale`` specialised to the example's 0.5."""
    result = rewriter.rewrite(SquashedForward().eval(), example={"x": torch.randn(1, 4), "scale": 0.5}, positional=1)
    assert result.locations.strip(result.source).strip() + "\n" == golden("""
        def forward(self, x, scale=0.5):
            x_2 = x
            if x_2.sum() > 0:
                x_2 = self.fc(x_2) * 0.5
            out = x_2
            return torch.tanh(out) + 0.1
    """)
