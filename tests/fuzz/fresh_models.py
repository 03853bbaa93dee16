"""Models made from the programs the fresh patterns' campaigns shrank (``dycl.fuzz.patterns_fresh``),
written as people write them; ``test_fuzz_fresh`` compiles them."""

from __future__ import annotations

import functools
import types

import torch
from torch import nn


def score(t):
    return float(t.sum())


class KeyedByGlobal(nn.Module):
    """Seed 1, program 104: a hook on the model makes ``forward`` a callee, and the lowering of
    ``max(..., key=score)`` drew the fresh name ``score``, shadowing the global function."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_forward_pre_hook(lambda m, args: (args[0] * 0.5,))

    def forward(self, x):
        x = max((x, -x, self.fc(x)), key=score)
        if x.mean() > 0.5:
            return self._pick(x)
        return x * 2

    def _pick(self, x):  # a helper method: a callee too
        best = max([x * 0.5, torch.tanh(x)], key=score)
        return best + 1


class AliasedArgument(nn.Module):
    """Seed 1, program 42: the argument updated in place under another name after ``x`` was rebound.
    The caller's tensor changes in eager PyTorch; no name dycl tracks holds it any more."""

    def forward(self, x):
        inp = x
        x = torch.tanh(x) + 0.1
        if inp.mean() > 0:
            inp.add_(0.25)  # MARK
        return x + inp * 0.1


class UpdatedArgument(nn.Module):
    """What the hint of ``AliasedArgument``'s refusal proposes: the argument updated under its own name."""

    def forward(self, x):
        h = torch.tanh(x) + 0.1
        if x.mean() > 0:
            x.add_(0.25)
        else:
            x.mul_(0.5)
        return h + x * 0.1


class rescaled:  # a decorator, named as one
    """A class-based decorator of a method: ``__get__`` binds the module, ``__call__`` wraps the method."""

    def __init__(self, fn):
        functools.update_wrapper(self, fn)
        self.fn = fn

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    def __call__(self, module, x, *args, **kwargs):
        if x.abs().max() > 2.0:
            x = x * 0.5
        return self.fn(module, x, *args, **kwargs)


class ClassDecoratedForward(nn.Module):
    """Seed 1, program 11: ``forward`` decorated by a class (before: ``TypeError``, not a function)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    @rescaled
    def forward(self, x):
        if x.sum() > 0:
            return self.fc(x)
        return -x


class bypassing:  # a decorator whose __get__ binds the wrapped function itself: its __call__ never runs
    def __init__(self, fn):
        functools.update_wrapper(self, fn)
        self.fn = fn

    def __get__(self, obj, objtype=None):
        return self if obj is None else types.MethodType(self.fn, obj)

    def __call__(self, module, x):
        return self.fn(module, x) * 2


class BypassedDecorator(nn.Module):
    @bypassing
    def forward(self, x):
        if x.sum() > 0:
            return x
        return -x


def count_hits(module, inputs, output):
    if output.sum() > 0:
        module.hits += 1


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    @rescaled
    def forward(self, x):
        if x.mean() > 0:
            return self.fc(x)
        return -x


class HookedClassDecorated(nn.Module):
    """Seed 3, program 39: a class-decorated forward on a model with a hook that writes state (before:
    refused, ``self.forward`` compiled as one graph), and a submodule whose forward is class-decorated
    too (before: traced, its decorator's test frozen)."""

    def __init__(self):
        super().__init__()
        self.hits = 0
        self.register_forward_hook(count_hits)
        self.block = Block()

    @rescaled
    def forward(self, x):
        if x.sum() > 0:
            x = torch.tanh(x)
        return self.block(x) + self.hits * 0.1


class SwappedToClassDecorated(nn.Module):
    """Seed 12, program 70: ``self.forward = self._infer`` with ``_infer`` decorated by a class (before:
    refused as a ``functools.partial`` with positional arguments)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.forward = self._infer

    def forward(self, x):  # a decoy: the instance attribute wins
        return x

    @rescaled
    def _infer(self, x):
        if x.sum() > 0:
            return self.fc(x)
        return -x
