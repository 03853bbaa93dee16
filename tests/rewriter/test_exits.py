"""Loop exits and structured control flow: while loops, break, continue, early return, elif, loop else."""

from __future__ import annotations

import torch
from rewrite_checks import assert_no_static_ifs, build, called_indices, check, count_ifs, randn_inputs
from torch import nn


def _linears(n: int) -> nn.ModuleList:
    return nn.ModuleList([nn.Linear(8, 8) for _ in range(n)])


class BoundedWhile(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.Linear(8, 8)
        self.max_steps = 4

    def forward(self, x):
        step = 0
        while step < self.max_steps:
            x = torch.tanh(self.cell(x))
            if x.sum() > 0.5:
                break
            step += 1
        return x, step


def test_bounded_while_with_tensor_break():
    model = build(BoundedWhile)
    checked = check(model, randn_inputs(1, 8), min_paths=3)
    assert count_ifs(checked.tree) == 4
    assert checked.source.count("self.cell(") == 4
    assert "max_steps" not in checked.source
    assert_no_static_ifs(checked.tree)


class WhileTrue(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.Linear(8, 8)
        self.max_steps = 3

    def forward(self, x):
        n = 0
        while True:
            x = torch.tanh(self.cell(x))
            n += 1
            if n >= self.max_steps:
                break
            if x.mean() > 0.1:
                break
        return x, n


def test_while_true_with_counter_and_tensor_breaks():
    model = build(WhileTrue)
    checked = check(model, randn_inputs(1, 8), min_paths=3)
    # the counter test folds; only the tensor tests of the first max_steps - 1 iterations remain
    assert count_ifs(checked.tree) == 2
    assert checked.source.count("self.cell(") == 3
    assert "max_steps" not in checked.source
    assert_no_static_ifs(checked.tree)


class BreakInFor(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(3)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
            if x.sum() > 1.0:
                break
            x = torch.tanh(x)
        return x


def test_break_in_for():
    model = build(BreakInFor)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 3
    assert called_indices(checked.source, "layers") == ["0", "1", "2"]


class ContinueInFor(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(3)

    def forward(self, x):
        for layer in self.layers:
            if x.sum() < 0:
                x = x * -0.5
                continue
            x = layer(x)
        return x


def test_continue_in_for():
    model = build(ContinueInFor)
    checked = check(model, randn_inputs(2, 8), min_paths=4)
    # the rest of the loop follows both ways through each iteration's if, so it is copied into both branches
    assert set(called_indices(checked.source, "layers")) == {"0", "1", "2"}
    assert 3 <= count_ifs(checked.tree) <= 7
    assert "if x.sum() < 0:" in checked.source and "x = x * -0.5" in checked.source


class EarlyReturnInLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(3)
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
            if x.sum() > 1.0:
                return self.head(x)
            x = torch.tanh(x)
        return self.head(x * 2)


def test_early_return_in_loop():
    model = build(EarlyReturnInLoop)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 3
    assert checked.source.count("return ") == 4


class EarlyReturnInNestedIf(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 8)
        self.fc2 = nn.Linear(8, 8)
        self.fc3 = nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc1(x)
        if h.sum() > 0:
            if h.max() > 2.0:
                return h * 2
            h = h - 1
        else:
            h = self.fc2(h)
        return self.fc3(h)


def test_early_return_in_nested_if():
    model = build(EarlyReturnInNestedIf)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 2
    assert "return h * 2" in checked.source
    assert checked.source.count("self.fc3(") == checked.source.count("return self.fc3(")


class ElifChain(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        s = self.fc(x).sum()
        if s > 1:
            y = x * 3
        elif s > 0:
            y = x * 2
        elif s > -1:
            y = x + 1
        else:
            y = -x
        return y


def test_elif_chain():
    model = build(ElifChain)
    checked = check(model, randn_inputs(2, 8), min_paths=4)
    assert count_ifs(checked.tree) == 3
    assert "elif" not in checked.source


class BreakInNestedIf(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(3)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
            if x.sum() > 0:
                if x.max() > 2.0:
                    break
                x = x * 0.5
            else:
                x = -x
        return x


def test_break_in_nested_if_in_loop():
    model = build(BreakInNestedIf)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert set(called_indices(checked.source, "layers")) == {"0", "1", "2"}
    assert "x.max() > 2.0" in checked.source
    assert_no_static_ifs(checked.tree)


class LoopElseWithBreak(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(3)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
            if x.sum() > 1.5:
                break
            x = torch.tanh(x)
        else:
            x = x + 100
        return x


def test_loop_else_with_break():
    model = build(LoopElseWithBreak)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 3
    assert checked.source.count("x + 100") == 1


class NestedLoopsInnerBreak(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(6)

    def forward(self, x):
        for i in range(2):
            for j in range(3):
                x = self.layers[i * 3 + j](x)
                if x.sum() > 1.0:
                    break
                x = x * 0.9
            x = x + i
        return x


def test_nested_loops_with_inner_break():
    model = build(NestedLoopsInnerBreak)
    checked = check(model, randn_inputs(2, 8), min_paths=4)
    # the outer loop's second iteration follows every way out of the first inner loop
    assert "self.layers[3]" in checked.source and "self.layers[5]" in checked.source
    assert "x + 1" in checked.source and "x + 0" in checked.source
