"""Python values next to tensors: lists, counters, scalars pulled out of tensors, specialized keyword arguments."""

from __future__ import annotations

import pytest
import torch
from rewrite_checks import assert_no_static_ifs, build, check, count_ifs, randn_inputs
from torch import nn

from dycl.harness.testing import outputs_match


def _linears(n: int) -> nn.ModuleList:
    return nn.ModuleList([nn.Linear(8, 8) for _ in range(n)])


class ListOps(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(3)

    def forward(self, x):
        outs = []
        for layer in self.layers:
            x = layer(x)
            outs.append(x)
        outs.extend([x * 2, x * 3])
        if outs[-1].sum() > 0:
            y = outs[0] + outs[-2]
        else:
            y = outs[1] - outs[-1]
        return y, outs


def test_list_append_extend_and_indexing():
    model = build(ListOps)
    checked = check(model, randn_inputs(2, 8), min_paths=2)
    assert count_ifs(checked.tree) == 1


class ListAppendInBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(3)

    def forward(self, x):
        outs = [x]
        for layer in self.layers:
            x = layer(x)
            if x.sum() > 0:
                outs.append(x)
        return outs[-1], len(outs)


def test_list_append_under_data_dependent_branch():
    model = build(ListAppendInBranch)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 3


class IterateBuiltList(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(3)
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        outs = []
        for layer in self.layers:
            x = layer(x)
            outs.append(torch.tanh(x))
        acc = torch.zeros_like(x)
        for o in outs:
            if (acc + o).sum() > 0:
                acc = acc + o
            else:
                acc = self.fc(acc - o)
        return acc


def test_iterate_list_built_by_appends():
    model = build(IterateBuiltList)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 3


class LenOfBuiltList(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(3)

    def forward(self, x):
        outs = []
        for layer in self.layers:
            x = layer(x)
            outs.append(x)
        scale = len(outs)
        acc = torch.zeros_like(x)
        for i in range(len(outs)):
            if outs[i].sum() > 0:
                acc = acc + outs[i] / scale
        return acc, len(outs)


def test_len_of_list_built_by_appends():
    model = build(LenOfBuiltList)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 3
    assert "range(" not in checked.source


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(4)

    def forward(self, x):
        steps = 0
        for layer in self.layers:
            if x.sum() > 0:
                x = layer(x)
                steps += 1
            else:
                x = x + 1
        return x, steps


def test_counter_returned_as_python_int():
    model = build(Counter)
    checked = check(model, randn_inputs(2, 8), min_paths=4)
    assert count_ifs(checked.tree) == 4
    x = randn_inputs(2, 8)[0]
    _, steps = checked.rewritten.bind(model)(x)
    assert type(steps) is int


class MixedTupleReturn(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 8)
        self.fc2 = nn.Linear(8, 4)

    def forward(self, x):
        exit_id = 0
        h = self.fc1(x)
        if h.mean() > 0:
            exit_id = 1
            h = self.fc1(torch.tanh(h))
            if h.sum() > 0:
                exit_id = 2
        return self.fc2(h), exit_id, 3, (h, exit_id * 10)


def test_tuple_return_mixing_tensors_and_ints():
    model = build(MixedTupleReturn)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 2


class ScalarConversions(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc(x)
        v = h.sum().item()
        n = int(h.abs().sum())
        flag = bool(h[:, 0].mean() > 0)
        f = float(h.max())
        if v > 0:
            h = h * 2
        if flag:
            h = h + 1
        if n > 20:
            h = h - n
        if f > 3.0:
            h = -h
        return h, v, n, flag, f


def test_item_int_bool_float_on_tensors():
    model = build(ScalarConversions)
    checked = check(model, randn_inputs(2, 8), min_paths=4)
    assert count_ifs(checked.tree) == 4
    _, v, n, flag, f = checked.rewritten.bind(model)(randn_inputs(2, 8)[0])
    assert (type(v), type(n), type(flag), type(f)) == (float, int, bool, float)


class KeywordDefaults(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.gate = nn.Linear(8, 1)

    def forward(self, x, scale=2.0, use_gate=True):
        h = self.fc(x) * scale
        if use_gate:
            if self.gate(h).sum() > 0:
                h = torch.tanh(h)
            else:
                h = h / scale
        return h


def test_keyword_arguments_with_defaults():
    model = build(KeywordDefaults)
    inputs = randn_inputs(2, 8)
    checked = check(model, inputs, min_paths=2)
    assert count_ifs(checked.tree) == 1
    assert_no_static_ifs(checked.tree)
    assert checked.rewritten.specialized == {"scale": 2.0, "use_gate": True}
    fn = checked.rewritten.bind(model)
    with torch.no_grad():
        for x in inputs[:10]:
            expected = model(x, scale=2.0, use_gate=True)
            assert outputs_match(expected, fn(x, scale=2.0, use_gate=True)) is None
            assert outputs_match(expected, fn(x, 2.0, True)) is None
            assert outputs_match(expected, fn(x, use_gate=True)) is None
    with pytest.raises(ValueError):
        fn(inputs[0], scale=3.0)
    with pytest.raises(ValueError):
        fn(inputs[0], use_gate=False)
    with pytest.raises(ValueError):
        fn(inputs[0], 2.5, True)


class GradModeBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 8)
        self.fc2 = nn.Linear(8, 8)

    def forward(self, x):
        with torch.no_grad():
            h = self.fc1(x)
            if h.sum() > 0:
                h = h * 2
        y = self.fc2(h)
        if y.mean() < 0:
            y = -y
        return y


def test_no_grad_block_inside_forward():
    model = build(GradModeBlock)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert "with " not in checked.source and "no_grad" not in checked.source
    assert count_ifs(checked.tree) == 2


class NoneDefault(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(8, 8)

    def forward(self, x, h=None):
        if h is None:
            h = torch.zeros(x.shape[0], 8)
        h = self.cell(x, h)
        if h.sum() > 0:
            h = self.cell(x, h)
        return h


def test_none_default_argument():
    model = build(NoneDefault)
    inputs = randn_inputs(2, 8)
    checked = check(model, inputs, min_paths=2)
    assert "is None" not in checked.source
    assert count_ifs(checked.tree) == 1
    fn = checked.rewritten.bind(model)
    with torch.no_grad():
        assert outputs_match(model(inputs[0], None), fn(inputs[0], None)) is None
        assert outputs_match(model(inputs[0], h=None), fn(inputs[0], h=None)) is None
    with pytest.raises(ValueError):
        fn(inputs[0], torch.zeros(2, 8))

