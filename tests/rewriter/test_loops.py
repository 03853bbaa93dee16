"""Loop unrolling: every kind of static-trip-count loop, each with a data-dependent ``if`` in its body."""

from __future__ import annotations

import re

import torch
from rewrite_checks import assert_no_static_ifs, build, called_indices, check, count_ifs, randn_inputs, randn_pairs
from torch import nn


def _linears(n: int) -> nn.ModuleList:
    return nn.ModuleList([nn.Linear(8, 8) for _ in range(n)])


# -- range ----------------------------------------------------------------------------------------


class RangeLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(3)

    def forward(self, x):
        for i in range(3):
            x = self.layers[i](x)
            if x.sum() > 0:
                x = x.relu()
            else:
                x = x * 0.5 + i
        return x


def test_range_loop():
    model = build(RangeLoop)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 3
    assert called_indices(checked.source, "layers") == ["0", "1", "2"]
    assert_no_static_ifs(checked.tree)


class RangeStartStopStep(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(7)

    def forward(self, x):
        for i in range(1, 7, 2):
            x = self.layers[i](x)
            if x.sum() > i - 3:
                x = torch.tanh(x)
            else:
                x = -x
        for j in range(5, 0, -2):
            x = self.layers[j](x)
            if x.mean() > 0:
                x = x + j
        for k in range(2, 4):
            x = self.layers[k](x)
            if x.sum() < 0:
                x = x * k
        return x


def test_range_start_stop_step():
    model = build(RangeStartStopStep)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 8
    assert called_indices(checked.source, "layers") == ["1", "3", "5", "5", "3", "1", "2", "3"]
    assert_no_static_ifs(checked.tree)


# -- module containers ----------------------------------------------------------------------------


class ModuleListLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(3)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
            if x.mean() > 0:
                x = x.relu()
            else:
                x = x * 0.5
        return x


def test_module_list_loop():
    model = build(ModuleListLoop)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 3
    assert called_indices(checked.source, "layers") == ["0", "1", "2"]


def _blocks() -> nn.ModuleDict:
    return nn.ModuleDict({"a": nn.Linear(8, 8), "b": nn.Linear(8, 8), "c": nn.Linear(8, 8)})


class ModuleDictLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = _blocks()

    def forward(self, x):
        for name in self.blocks:
            x = self.blocks[name](x)
            if x.sum() > 0:
                x = x * 2
            else:
                x = x - 1
        return x


class ModuleDictItems(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = _blocks()

    def forward(self, x):
        for name, block in self.blocks.items():
            x = block(x)
            if x.sum() > 0:
                x = x * len(name) + 1
            else:
                x = -x
        return x


class ModuleDictKeys(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = _blocks()

    def forward(self, x):
        for key in self.blocks.keys():  # noqa: SIM118 - the construct under test
            x = self.blocks[key](x)
            if x.mean() > 0:
                x = torch.tanh(x)
        return x


class ModuleDictValues(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = _blocks()

    def forward(self, x):
        for block in self.blocks.values():
            x = block(x)
            if x.sum() < 0:
                x = x.abs()
            else:
                x = x - 0.5
        return x


def _module_dict_calls(source: str) -> list[str]:
    return re.findall(r"self\.blocks(?:\.(\w+)|\[['\"](\w+)['\"]\])", source)


def _check_module_dict(cls):
    model = build(cls)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 3
    calls = ["".join(match) for match in _module_dict_calls(checked.source)]
    assert calls == ["a", "b", "c"], checked.source
    assert ".items()" not in checked.source and ".keys()" not in checked.source
    assert ".values()" not in checked.source
    assert_no_static_ifs(checked.tree)


def test_module_dict_direct_iteration():
    _check_module_dict(ModuleDictLoop)


def test_module_dict_items():
    _check_module_dict(ModuleDictItems)


def test_module_dict_keys():
    _check_module_dict(ModuleDictKeys)


def test_module_dict_values():
    _check_module_dict(ModuleDictValues)


class SequentialLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8))

    def forward(self, x):
        for module in self.seq:
            x = module(x)
            if x.sum() > 0:
                x = x * 2
            else:
                x = x + 1
        return x


def test_sequential_loop():
    model = build(SequentialLoop)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 3
    assert called_indices(checked.source, "seq") == ["0", "1", "2"]


# -- enumerate, zip, reversed ---------------------------------------------------------------------


class EnumerateLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(3)

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if x.sum() > i:
                x = x - i
            else:
                x = x + i * 0.5
        return x


def test_enumerate():
    model = build(EnumerateLoop)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 3
    assert "enumerate" not in checked.source
    assert called_indices(checked.source, "layers") == ["0", "1", "2"]


class EnumeratePositionalStart(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(3)

    def forward(self, x):
        for i, layer in enumerate(self.layers, 1):
            x = layer(x) * i
            if x.sum() > 0:
                x = torch.tanh(x)
            else:
                x = x / i
        return x


def test_enumerate_with_positional_start():
    model = build(EnumeratePositionalStart)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 3
    assert "enumerate" not in checked.source
    assert called_indices(checked.source, "layers") == ["0", "1", "2"]
    for k in (1, 2, 3):
        assert f"* {k}" in checked.source


class EnumerateKeywordStart(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(3)

    def forward(self, x):
        for k, layer in enumerate(self.layers, start=10):
            x = layer(x)
            if x.mean() > 0:
                x = x / k
            else:
                x = torch.tanh(x) * k
        return x


def test_enumerate_with_keyword_start():
    model = build(EnumerateKeywordStart)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 3
    assert "enumerate" not in checked.source
    assert called_indices(checked.source, "layers") == ["0", "1", "2"]
    for k in (10, 11, 12):
        assert f"/ {k}" in checked.source


class ZipModuleListRange(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(3)

    def forward(self, x):
        for layer, k in zip(self.layers, range(1, 4)):
            x = layer(x)
            if x.sum() > 0:
                x = x * k
            else:
                x = x - k
        return x


def test_zip_module_list_and_range():
    model = build(ZipModuleListRange)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 3
    assert "zip" not in checked.source
    assert called_indices(checked.source, "layers") == ["0", "1", "2"]


class ZipTwoModuleLists(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = _linears(3)
        self.dec = _linears(3)

    def forward(self, x):
        for encode, decode in zip(self.enc, self.dec):
            h = encode(x)
            if h.sum() > 0:
                x = decode(h)
            else:
                x = h * 0.5
        return x


def test_zip_two_module_lists():
    model = build(ZipTwoModuleLists)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 3
    assert "zip" not in checked.source
    assert called_indices(checked.source, "enc") == ["0", "1", "2"]
    assert called_indices(checked.source, "dec") == ["0", "1", "2"]


class ReversedLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(3)

    def forward(self, x):
        for layer in reversed(self.layers):
            x = layer(x)
            if x.sum() > 0:
                x = x.relu()
        for i in reversed(range(3)):
            x = self.layers[i](x) + i
            if x.mean() < 0:
                x = -x
        return x


def test_reversed():
    model = build(ReversedLoop)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 6
    assert "reversed" not in checked.source
    assert called_indices(checked.source, "layers") == ["2", "1", "0", "2", "1", "0"]


# -- literal sequences ----------------------------------------------------------------------------


class LiteralIntsLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        for k in [3, 1, 2]:
            x = self.fc(x)
            if x.sum() > k - 2:
                x = x * k
            else:
                x = x - k
        for scale in (0.5, -1.0):
            if x.mean() > 0:
                x = x * scale
        return x


def test_literal_list_and_tuple_of_numbers():
    model = build(LiteralIntsLoop)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 5
    assert "[3, 1, 2]" not in checked.source and "(0.5, -1.0)" not in checked.source
    assert_no_static_ifs(checked.tree)


class LiteralModulesLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)

    def forward(self, x):
        for module in [self.a, self.b, self.a]:
            x = module(x)
            if x.sum() > 0:
                x = torch.tanh(x)
            else:
                x = x * 0.25
        return x


def test_literal_list_of_modules():
    model = build(LiteralModulesLoop)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 3
    body = checked.source
    assert body.index("self.a(") < body.index("self.b(") < body.rindex("self.a(")


class LiteralTensorsLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x, y):
        acc = torch.zeros_like(x)
        for t in [x, y, x * y]:
            if t.sum() > 0:
                acc = acc + t
            else:
                acc = acc - self.fc(t)
        return acc


def test_literal_list_of_tensors():
    model = build(LiteralTensorsLoop)
    checked = check(model, randn_pairs((2, 8), (2, 8)), min_paths=4)
    assert count_ifs(checked.tree) == 3


# -- nesting and configured bounds ----------------------------------------------------------------


class NestedRangeLoops(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(6)

    def forward(self, x):
        for i in range(2):
            for j in range(3):
                x = self.layers[i * 3 + j](x)
                if x.sum() > 0:
                    x = x * 0.5
                else:
                    x = x + j
        return x


def test_nested_loops():
    model = build(NestedRangeLoops)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 6
    assert called_indices(checked.source, "layers") == ["0", "1", "2", "3", "4", "5"]


class NestedModuleListLoops(nn.Module):
    def __init__(self):
        super().__init__()
        self.stages = nn.ModuleList([_linears(2), _linears(3)])

    def forward(self, x):
        for i, stage in enumerate(self.stages):
            for block in stage:
                x = block(x)
                if x.sum() > i:
                    x = torch.tanh(x)
            x = x * 2
        return x


def test_nested_module_list_loops():
    model = build(NestedModuleListLoops)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 5
    for path in ("self.stages[0][0]", "self.stages[0][1]", "self.stages[1][0]", "self.stages[1][2]"):
        assert path in checked.source


class ConfiguredBoundsLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.num_layers = [2, 0, 3]
        self.groups = nn.ModuleList([_linears(n) for n in self.num_layers])

    def forward(self, x):
        for g in range(3):
            for i in range(self.num_layers[g]):
                x = self.groups[g][i](x)
                if x.sum() > 0:
                    x = x.relu() + g
                else:
                    x = x * 0.5
        return x


def test_loop_bounds_from_self_config():
    model = build(ConfiguredBoundsLoop)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 5
    assert "num_layers" not in checked.source
    for path in ("self.groups[0][0]", "self.groups[0][1]", "self.groups[2][0]", "self.groups[2][2]"):
        assert path in checked.source
    assert "self.groups[1]" not in checked.source


class LenBoundLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = _linears(4)

    def forward(self, x):
        for i in range(len(self.blocks) - 1):
            x = self.blocks[i](x)
            if x.sum() > 0:
                x = x * 2
        for i in range(len(self.blocks)):
            x = self.blocks[i](x)
            if x.mean() < 0:
                x = x - 1
        return x


def test_loop_bound_from_len():
    model = build(LenBoundLoop)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 7
    assert "len(" not in checked.source
    assert called_indices(checked.source, "blocks") == ["0", "1", "2", "0", "1", "2", "3"]
