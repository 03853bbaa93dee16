"""Small models written the way other people write PyTorch (tutorials, research code, Kaggle
notebooks), each with data-dependent control flow or dynamic Python: the corpus of the fresh
soundness hunt (tests/soundness/test_fresh_hunt.py). ``CASES`` maps a name to a factory of
(model, example, inputs)."""

from __future__ import annotations

import functools
from collections import namedtuple
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

# ---------------------------------------------------------------- 1. in-place on views / aliases


class SliceAddInplace(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        y = h[:, :2]
        y += 1
        if h.sum() > 0:
            return h * 2
        return h


class ClampInputInplace(nn.Module):
    def forward(self, x):
        x = x * 1.0
        if x.mean() > 0:
            x.clamp_(min=0.0)
        else:
            x.clamp_(max=0.0)
        return x + 1


class ColumnLoopWrite(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        out = torch.zeros(x.shape[0], 3)
        for i in range(3):
            out[:, i] = self.fc(x).sum(1) * (i + 1)
        if out.sum() > 0:
            out = out.relu()
        return out


class CatOfViewsThenWrite(nn.Module):
    def forward(self, x):
        a = x[:, :2]
        b = x[:, 2:]
        c = torch.cat([a, b], 1)
        c[:, 0] = 0.0
        if c.sum() > 0:
            return c, x
        return -c, x


class IndexAddBranch(nn.Module):
    def forward(self, x):
        acc = torch.zeros(3, x.shape[1])
        idx = torch.arange(x.shape[0]) % 3
        if x.max() > 1:
            acc.index_add_(0, idx, x)
        else:
            acc.index_add_(0, idx, -x)
        return acc


class ScatterOneHot(nn.Module):
    def forward(self, x):
        labels = x.argmax(1)
        onehot = torch.zeros_like(x)
        onehot.scatter_(1, labels.unsqueeze(1), 1.0)
        if labels.sum() > 3:
            return onehot * x
        return onehot


class MaskedFillUnderBranch(nn.Module):
    def forward(self, x):
        scores = x @ x.t()
        if x.sum() > 0:
            scores.masked_fill_(scores < 0, float("-inf"))
        return F.softmax(scores, -1)


class TransposeContiguousWrite(nn.Module):
    def forward(self, x):
        t = x.transpose(0, 1).contiguous()
        t[0] = 5.0
        v = x.transpose(0, 1)
        if x.sum() > 0:
            return t + v
        return t - v


class InputViewWrite(nn.Module):
    """Writes into a view of its own input (the caller sees the change)."""

    def forward(self, x):
        head = x[:, 0]
        if x.sum() > 0:
            head.mul_(2)
        return x.sum(1)


# ---------------------------------------------------------------- 2. Python dynamism


class GetattrLayerByData(nn.Module):
    def __init__(self):
        super().__init__()
        for i in range(3):
            setattr(self, f"layer{i}", nn.Linear(4, 4))

    def forward(self, x):
        i = int(x.sum().item() > 0)
        if x.mean().item() > 0.5:
            i = 2
        return getattr(self, f"layer{i}")(x)


class ModuleDictByString(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({"pos": nn.Linear(4, 2), "neg": nn.Linear(4, 2)})

    def forward(self, x):
        if x.mean() > 0:
            key = "pos"
        else:
            key = "neg"
        return self.heads[key](x)


class StoredLambda(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = lambda t: t * torch.sigmoid(t)
        self.scale = functools.partial(torch.mul, other=3.0)

    def forward(self, x):
        if x.sum() > 0:
            return self.act(x)
        return self.scale(x)


class TreeNet(nn.Module):
    """A recursive, tree-structured net (depth fixed at construction)."""

    def __init__(self, depth=2):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.left = TreeNet(depth - 1) if depth > 0 else None
        self.right = TreeNet(depth - 1) if depth > 0 else None

    def forward(self, x):
        h = torch.tanh(self.fc(x))
        if self.left is None:
            return h
        if h.mean() > 0:
            return self.left(h)
        return self.right(h)


class GeneratorOverLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))

    def forward(self, x):
        total = sum(layer(x) for layer in self.layers)
        if total.sum() > 0:
            return total
        return -total


class KwargsForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def block(self, *args, **kwargs):
        return self._inner(*args, **kwargs)

    def _inner(self, x, scale=1.0, shift=0.0):
        return self.fc(x) * scale + shift

    def forward(self, x):
        opts = {"scale": 2.0}
        if x.sum() > 0:
            opts["shift"] = 1.0
        return self.block(x, **opts)


class BaseNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)


class SuperForward(BaseNet):
    def forward(self, x):
        h = super().forward(x)
        if h.sum() > 0:
            return h.relu()
        return h


@dataclass
class Output:
    logits: torch.Tensor
    flag: bool


Pair = namedtuple("Pair", ["a", "b"])


class DataclassOutput(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        y = self.fc(x)
        return Output(logits=y, flag=bool(y.sum() > 0))


class NamedTupleOutput(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return Pair(x * 2, x.sum())
        return Pair(x, x.mean())


class DictOutput(nn.Module):
    def forward(self, x):
        out = {"base": x + 1}
        if x.mean() > 0:
            out["extra"] = x * 2
        return out


class DataDefaultKwarg(nn.Module):
    def helper(self, x, k=2):
        return x.topk(k, dim=1).values

    def forward(self, x):
        if x.sum() > 0:
            return self.helper(x, k=3)
        return self.helper(x)


# ---------------------------------------------------------------- 3. torch's own dynamic constructs


class TorchCond(nn.Module):
    def forward(self, x):
        def positive(t):
            return t.cos()

        def negative(t):
            return t.sin()

        y = torch.cond(x.sum() > 0, positive, negative, (x,))
        if y.sum() > 2:
            return y * 2
        return y


class TorchAssert(nn.Module):
    def forward(self, x):
        torch._assert(x.dim() == 2, "need 2-D")
        if x.sum() > 0:
            return x * 2
        return x


class ScriptingCompilingChecks(nn.Module):
    def forward(self, x):
        if torch.jit.is_scripting() or torch.compiler.is_compiling():
            return x
        if x.sum() > 0:
            return x + 1
        return x - 1


class GradEnabledBranch(nn.Module):
    def forward(self, x):
        if torch.is_grad_enabled():
            return x * 100
        if x.sum() > 0:
            return x + 1
        return x - 1


class NoGradAndAutocast(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        with torch.no_grad():
            h = self.fc(x)
        with torch.autocast("cpu", enabled=False):
            h = h * 2
        with torch.enable_grad():
            h = h + 1
        if h.sum() > 0:
            return h
        return -h


class SingleArgWhere(nn.Module):
    def forward(self, x):
        (rows,) = torch.where(x.sum(1) > 0)
        if rows.numel() > 0:
            return x[rows].sum(0)
        return x.sum(0)


class EmptyThenFill(nn.Module):
    def forward(self, x):
        out = torch.empty(x.shape[0], 4)
        if x.sum() > 0:
            out.fill_(1.0)
        else:
            out.copy_(x)
        return out


class ManualSeedInForward(nn.Module):
    def forward(self, x):
        torch.manual_seed(0)
        noise = torch.randn(x.shape)
        if x.sum() > 0:
            return x + noise
        return x - noise


# ---------------------------------------------------------------- 4. dtypes


class DtypeBranch(nn.Module):
    def forward(self, x):
        if x.dtype == torch.float16:
            return x.float() * 2
        if x.sum() > 0:
            return x.double().sum(1)
        return x.half().float()


class IntDivision(nn.Module):
    def forward(self, x):
        n = (x > 0).sum()
        q = n // 3
        r = torch.div(x * 10, 3, rounding_mode="floor")
        if q > 1:
            return r + q
        return r - n


class ToOtherDtype(nn.Module):
    def forward(self, x, mask):
        m = mask.to(x.dtype)
        if mask.sum() > 2:
            return x * m
        return x + m


class FloatOfIntInput(nn.Module):
    def forward(self, x):
        y = x.float() / 2
        if x.sum() > 10:
            return y.mean()
        return y.sum()


class BoolArithmetic(nn.Module):
    def forward(self, x):
        pos = x > 0
        neg = x < 0
        count = pos.sum() - neg.sum()
        both = pos & ~neg
        if count > 0:
            return both.float() + count
        return (pos + neg).float()


class Int64Sum(nn.Module):
    def forward(self, x):
        big = x.long() * (2**40)
        s = big.sum()
        if s > 0:
            return s * 1000
        return s


# ---------------------------------------------------------------- 5. state across calls


class BufferWriteUnderBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("seen", torch.zeros(1))

    def forward(self, x):
        if x.sum() > 0:
            self.seen += 1
        return x * self.seen


class ClassAttributeCounter(nn.Module):
    calls = 0

    def forward(self, x):
        ClassAttributeCounter.calls += 1
        if x.sum() > 0:
            return x * ClassAttributeCounter.calls
        return x


_CACHE: dict = {}


class ModuleLevelCache(nn.Module):
    def forward(self, x):
        key = x.shape[0]
        if key not in _CACHE:
            _CACHE[key] = torch.arange(key).float()
        pos = _CACHE[key]
        if x.sum() > 0:
            return x + pos[:, None]
        return x


def make_closure_model():
    history = []

    class ClosureList(nn.Module):
        def forward(self, x):
            history.append(1)
            if x.sum() > 0:
                return x * len(history)
            return x

    return ClosureList()


class RegisterBufferInForward(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            self.register_buffer("last", x.detach().clone())
        return x + (self.last if hasattr(self, "last") else 0)


class NegativeFloorDivInt(nn.Module):
    def forward(self, x):
        q = x // 3
        r = x % 3
        if q.sum() < 0:
            return q * 10 + r
        return torch.div(x, 2, rounding_mode="trunc") + r


class HalfRoundTrip(nn.Module):
    def forward(self, x):
        if x.abs().max() > 2:
            return (x * 1000).half().float()
        return x.to(torch.int32).float() + x.round()


class MaskedAssignBranch(nn.Module):
    def forward(self, x):
        out = x.new_zeros(x.shape)
        mask = x > 0
        if mask.sum() > 6:
            out[mask] = x[mask] * 2
        else:
            out[~mask] = 1.0
        return out


class InferenceModeBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        with torch.inference_mode():
            h = self.fc(x)
        if h.sum() > 0:
            return h
        return h * -1


class LongOverflowSum(nn.Module):
    def forward(self, x):
        big = (x * 1e3).long() * (2**60)
        total = big.sum(1)
        if total.sum() > 0:
            return total
        return -total


def _randn(n=60, shape=(3, 4), scale=1.0):
    g = torch.Generator().manual_seed(1)
    return [torch.randn(*shape, generator=g) * scale + (0.3 if i % 2 else -0.3) for i in range(n)]


def _ints(n=60):
    g = torch.Generator().manual_seed(2)
    return [torch.randint(-3, 6, (3, 4), generator=g) for _ in range(n)]


def _masks(n=60):
    g = torch.Generator().manual_seed(3)
    return [(torch.randn(3, 4, generator=g), (torch.rand(3, 4, generator=g) > 0.7).long()) for _ in range(n)]


FAMILIES = {
    "inplace": [MaskedAssignBranch, SliceAddInplace, ClampInputInplace, ColumnLoopWrite, CatOfViewsThenWrite,
                IndexAddBranch, ScatterOneHot, MaskedFillUnderBranch, TransposeContiguousWrite, InputViewWrite],
    "python": [GetattrLayerByData, ModuleDictByString, StoredLambda, TreeNet, GeneratorOverLayers, KwargsForward,
               SuperForward, DataclassOutput, NamedTupleOutput, DictOutput, DataDefaultKwarg],
    "torch": [InferenceModeBlock, TorchCond, TorchAssert, ScriptingCompilingChecks, GradEnabledBranch,
              NoGradAndAutocast, SingleArgWhere, EmptyThenFill, ManualSeedInForward],
    "dtype": [NegativeFloorDivInt, HalfRoundTrip, LongOverflowSum, DtypeBranch, IntDivision, ToOtherDtype,
              FloatOfIntInput, BoolArithmetic, Int64Sum],
    "state": [BufferWriteUnderBranch, ClassAttributeCounter, ModuleLevelCache, make_closure_model,
              RegisterBufferInForward],
}

# Known crashes (any exception other than dycl.UnsupportedError), kept out of the tests:
# DataclassOutput (a bool field computed from a tensor).

INPUTS = {ToOtherDtype: _masks, FloatOfIntInput: _ints, Int64Sum: _ints, NegativeFloorDivInt: _ints}


def inputs_for(factory) -> list:
    """The ≥ 50 inputs a corpus model is checked on."""
    return INPUTS.get(factory, _randn)()
