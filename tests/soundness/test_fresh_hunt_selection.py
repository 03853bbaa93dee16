"""Fresh hunt, family 9: a module or function picked by data, written as other people write
it (``ModuleList`` indexed by ``.item()`` or by a 0-d tensor, a dict literal ``{0: self.a,
...}[int(c)]``, ``ModuleDict[str(int(k))]``, a tuple of plain functions, ``getattr(self,
f"head_{i}")``, a list of bound methods, ``operator.itemgetter``). Every path is a host
condition (``rewriter.choices``), or the statement is refused at its line."""

from __future__ import annotations

import operator

import pytest
import torch
import torch.nn as nn

from tests.soundness.fresh_hunt import Case, at, check_case, seeded


class Scale(nn.Module):
    def forward(self, x):
        return x * 3


class Shift(nn.Module):
    def forward(self, x):
        return x - 1


class Square(nn.Module):
    def forward(self, x):
        return x * x


class ListByItem(nn.Module):  # a difficulty level 0..2 computed with .item() calls
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleList([Scale(), Shift(), Square()])

    def forward(self, x):
        level = x.sum().gt(0).long().item() + x.max().gt(1.5).long().item()
        return self.heads[level](x)


class ListByTensor(nn.Module):  # indexed by the 0-d tensor argmax returns
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleList([Scale(), Shift(), Square()])

    def forward(self, x):  # x: (3,)
        return self.heads[x.argmax()](x)


class DictLiteralDispatch(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = Scale(), Shift(), Square()

    def forward(self, x):
        c = int(x.sum() > 0) + int(x.max() > 1.5)
        return {0: self.a, 1: self.b, 2: self.c}[c](x)


class ModuleDictByRoundedKey(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({"0": Scale(), "1": Shift(), "2": Square()})

    def forward(self, x):
        k = torch.clamp(x.sum().round(), 0, 2)
        return self.heads[str(int(k))](x)


def _relu(t):
    return t.clamp(min=0)


def _neg(t):
    return -t


def _half(t):
    return t / 2


class TupleOfFunctions(nn.Module):
    def forward(self, x):
        acts = (_relu, _neg, _half)
        return acts[int(x.abs().sum()) % 3](x)


class GetattrByItem(nn.Module):
    def __init__(self):
        super().__init__()
        self.head_0, self.head_1, self.head_2 = Scale(), Shift(), Square()

    def forward(self, x):  # x: (1, 3)
        i = int(x.argmax(dim=-1)[0])
        return getattr(self, f"head_{i}")(x)


class BoundMethods(nn.Module):
    def path_a(self, x):
        return x.relu()

    def path_b(self, x):
        return x.tanh()

    def forward(self, x):
        ops = [self.path_a, self.path_b]
        return ops[int(x.mean() > 0)](x)


class ItemGetterPick(nn.Module):
    def __init__(self):
        super().__init__()
        self.fcs = nn.ModuleList([Scale(), Shift()])

    def forward(self, x):
        pick = operator.itemgetter(int(x[0, 0] > 0))
        return pick(self.fcs)(x)


def _inputs(seed, shape, spread=1.0):
    def make():
        g = seeded(seed)
        return [torch.randn(*shape, generator=g) + (i % 3 - 1) * spread for i in range(51)]
    return make


CASES = {
    "list_by_item": Case(ListByItem, _inputs(91, (1, 4), 1.5), 3),
    "list_by_tensor": Case(ListByTensor, _inputs(92, (3,), 0.0), 3),
    "dict_literal": Case(DictLiteralDispatch, _inputs(93, (2, 4), 1.5), 3),
    "module_dict_rounded_key": Case(ModuleDictByRoundedKey, _inputs(94, (1, 4), 0.5), 3),
    "tuple_of_functions": Case(TupleOfFunctions, _inputs(95, (2, 4), 0.0), 3),
    "getattr_by_item": Case(GetattrByItem, _inputs(96, (1, 3), 0.0), 3),
    "bound_methods": Case(BoundMethods, _inputs(97, (2, 4)), 2,
                          refused=at("mixes the model with Python values", "ops = [self.path_a, self.path_b]")),
    "itemgetter": Case(ItemGetterPick, _inputs(98, (2, 4)), 2,
                       refused=at("itemgetter in `pick`", "return pick(self.fcs)(x)")),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_selection_by_data(name, tmp_path):
    case = CASES[name]
    assert check_case(case, tmp_path) == case.paths
