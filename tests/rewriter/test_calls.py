"""Inlining: helper methods and submodules with data-dependent control flow are inlined; the rest stay calls."""

from __future__ import annotations

import re

import torch
from rewrite_checks import assert_no_static_ifs, build, check, count_ifs, randn_inputs
from torch import nn


def _linears(n: int) -> nn.ModuleList:
    return nn.ModuleList([nn.Linear(8, 8) for _ in range(n)])


class HelperMethod(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(3)

    def _stage(self, x, k):
        x = self.layers[k](x)
        if x.sum() > 0:
            x = x * (k + 1)
        else:
            x = torch.tanh(x)
        return x

    def forward(self, x):
        x = self._stage(x, 0)
        x = self._stage(x, 2)
        return x


def test_helper_method_with_static_argument():
    model = build(HelperMethod)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    src = checked.source
    assert "_stage" not in src
    assert src.index("self.layers[0](") < src.index("self.layers[2](")
    assert "self.layers[1](" not in src
    assert re.search(r" \* 1\b", src) and re.search(r" \* 3\b", src)
    assert count_ifs(checked.tree) == 2


class TwoLevelHelpers(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(4)

    def _inner(self, x, k):
        x = self.layers[k](x)
        if x.mean() > 0:
            x = x - k
        return x

    def _outer(self, x, k):
        x = self._inner(x, 2 * k)
        if x.sum() < 0:
            x = -x
        return self._inner(x, 2 * k + 1)

    def forward(self, x):
        y = self._outer(x, 0)
        return self._outer(y, 1)


def test_helper_calling_helper():
    model = build(TwoLevelHelpers)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    src = checked.source
    assert "_inner" not in src and "_outer" not in src
    position = 0
    for k in range(4):
        position = src.index(f"self.layers[{k}](", position) + 1
    assert count_ifs(checked.tree) == 6
    assert_no_static_ifs(checked.tree)


class GatedBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.gate = nn.Linear(8, 1)

    def forward(self, x):
        y = self.fc(x)
        if self.gate(x).sum() > 0:
            return x + torch.tanh(y)
        return x


class GatedBlocksInLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([GatedBlock() for _ in range(3)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def test_submodule_with_control_flow_in_module_list_loop():
    model = build(GatedBlocksInLoop)
    checked = check(model, randn_inputs(2, 8), min_paths=4)
    src = checked.source
    for i in range(3):
        assert f"self.blocks[{i}](" not in src
        assert f"self.blocks[{i}].fc(" in src and f"self.blocks[{i}].gate(" in src
    assert count_ifs(checked.tree) == 3


class GatedStage(nn.Module):
    """A block holding a block with control flow, with control flow of its own."""

    def __init__(self):
        super().__init__()
        self.inner = GatedBlock()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        x = self.inner(x)
        if x.mean() > 0:
            x = self.proj(x)
        return x


class TwoLevelSubmodules(nn.Module):
    def __init__(self):
        super().__init__()
        self.stage1 = GatedStage()
        self.stage2 = GatedStage()

    def forward(self, x):
        x = self.stage1(x)
        x = self.stage2(x)
        return x


def test_submodule_inside_submodule():
    model = build(TwoLevelSubmodules)
    checked = check(model, randn_inputs(2, 8), min_paths=4)
    src = checked.source
    for stage in ("stage1", "stage2"):
        assert f"self.{stage}(" not in src and f"self.{stage}.inner(" not in src
        assert f"self.{stage}.inner.gate(" in src and f"self.{stage}.proj(" in src
    assert count_ifs(checked.tree) == 4


class HelperEarlyReturnInLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(3)
        self.head = nn.Linear(8, 2)

    def _scan(self, x):
        for layer in self.layers:
            x = layer(x)
            if x.sum() > 1.0:
                return x * 2
            x = torch.tanh(x)
        return x

    def forward(self, x):
        h = self._scan(x)
        return self.head(h)


def test_helper_with_early_return_in_loop():
    model = build(HelperEarlyReturnInLoop)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    src = checked.source
    assert "_scan" not in src
    assert count_ifs(checked.tree) == 3
    assert src.count("self.head(") == 1


class PlainSubmodules(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.seq = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.ReLU())
        self.lstm = nn.LSTM(4, 8, batch_first=True)
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        y = self.seq(self.conv(x))
        if y.mean() > 0.28:
            y = y * 2
        seq = y.flatten(2).transpose(1, 2)
        out, (h, c) = self.lstm(seq)
        if h.sum() > 2.0:
            return self.fc(out[:, -1])
        return c[0]


def test_plain_submodules_stay_calls():
    model = build(PlainSubmodules)
    checked = check(model, randn_inputs(2, 3, 6, 6), min_paths=3)
    src = checked.source
    assert "self.conv(" in src and "self.seq(" in src and "self.lstm(" in src and "self.fc(" in src
    assert "self.seq[0]" not in src
    assert count_ifs(checked.tree) == 2


class DownsampleBlock(nn.Module):
    def __init__(self, downsample: bool):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.downsample = nn.Linear(8, 8) if downsample else None

    def forward(self, x):
        out = self.fc(x)
        if self.downsample is not None:
            x = self.downsample(x)
        return torch.relu(out + x)


class StaticBranchSubmodules(nn.Module):
    def __init__(self):
        super().__init__()
        self.b1 = DownsampleBlock(True)
        self.b2 = DownsampleBlock(False)

    def forward(self, x):
        x = self.b1(x)
        if x.sum() > 15:
            x = self.b2(x)
        else:
            x = -x
        return x


def test_submodule_with_only_static_branches_stays_a_call():
    model = build(StaticBranchSubmodules)
    checked = check(model, randn_inputs(2, 8), min_paths=2)
    src = checked.source
    assert "self.b1(x)" in src and "self.b2(x)" in src
    assert "downsample" not in src
    assert count_ifs(checked.tree) == 1


class SequentialWithGatedBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(8, 8), GatedBlock(), nn.Tanh(), GatedBlock())

    def forward(self, x):
        x = self.seq(x)
        if x.sum() > 0:
            x = x * 2
        return x


def test_sequential_containing_control_flow_module():
    model = build(SequentialWithGatedBlock)
    checked = check(model, randn_inputs(2, 8), min_paths=4)
    src = checked.source
    assert "self.seq(" not in src
    assert "self.seq[0](" in src and "self.seq[2](" in src
    assert "self.seq[1](" not in src and "self.seq[3](" not in src
    assert "self.seq[1].gate(" in src and "self.seq[3].fc(" in src
    assert src.index("self.seq[0](") < src.index("self.seq[1].fc(") < src.index("self.seq[2](")
    assert src.index("self.seq[2](") < src.index("self.seq[3].fc(")
    assert count_ifs(checked.tree) == 3


class CallerNamesSurviveInlining(nn.Module):
    """The caller's ``y`` is live across inlined bodies that assign their own ``y``."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.block = GatedBlock()
        self.seq = nn.Sequential(nn.Linear(8, 8), GatedBlock())

    def _helper(self, x):
        y = x * 3
        if y.sum() > 0:
            return y
        return -y

    def forward(self, x):
        y = self.fc(x)
        x = self.block(x)
        z = self.seq(x)
        w = self._helper(z)
        return x + y + z + w


def test_inlined_locals_do_not_clobber_caller_names():
    model = build(CallerNamesSurviveInlining)
    checked = check(model, randn_inputs(2, 8), min_paths=4)
    assert "_helper" not in checked.source and "self.block(" not in checked.source
    assert count_ifs(checked.tree) == 3
