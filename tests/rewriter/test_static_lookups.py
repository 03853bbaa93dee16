"""Static lookups and tests that fold away: getattr by name, ModuleDict membership, per-layer flags, training."""

from __future__ import annotations

import torch
from rewrite_checks import assert_no_static_ifs, build, check, count_ifs, if_tests, randn_inputs
from torch import nn


class GetattrFString(nn.Module):
    def __init__(self):
        super().__init__()
        for i in range(3):
            setattr(self, f"layer{i}", nn.Linear(8, 8))

    def forward(self, x):
        for i in range(3):
            x = getattr(self, f"layer{i}")(x)
            if x.sum() > 0:
                x = torch.tanh(x)
            else:
                x = x * 0.5
        return x


def test_getattr_with_f_string():
    model = build(GetattrFString)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert "getattr" not in checked.source
    src = checked.source
    assert src.index("self.layer0(") < src.index("self.layer1(") < src.index("self.layer2(")
    assert count_ifs(checked.tree) == 3


class SkipNetLike(nn.Module):
    """After the SkipNet listing: layers and downsamplers looked up by formatted
    names, gates found by membership in a ModuleDict, and the loop variable
    reassigned inside the loop."""

    def __init__(self):
        super().__init__()
        self.num_layers = [3, 1, 2]
        for g in range(3):
            for i in range(self.num_layers[g] + 1):
                setattr(self, f"group{g + 1}_layer{i}", nn.Linear(8, 8))
                setattr(self, f"group{g + 1}_ds{i}", nn.Linear(8, 8) if i == 1 else None)
        self.attr_layers = nn.ModuleDict({
            "group1_gate2": nn.Linear(8, 1),
            "group2_gate0": nn.Linear(8, 1),
            "group3_gate1": nn.Linear(8, 1),
        })

    def forward(self, x):
        prev = x
        for g in range(3):
            for i in range(self.num_layers[g]):
                if g == 0 and i < self.num_layers[g] - 1:
                    i = i + 1
                ds = getattr(self, 'group{}_ds{}'.format(g + 1, i))  # noqa: UP032 - the construct under test
                if ds is not None:
                    prev = ds(prev)
                x = getattr(self, 'group{}_layer{}'.format(g + 1, i))(x)  # noqa: UP032
                name = 'group{}_gate{}'.format(g + 1, i)  # noqa: UP032
                if name in self.attr_layers:
                    gate = self.attr_layers[name](x)
                    if gate.sum() > 0:
                        x = x + prev
                    else:
                        x = prev
                prev = x
        return x


def test_skipnet_style_lookups():
    model = build(SkipNetLike)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    src = checked.source
    for gone in ("getattr", ".format", "attr_layers:", " in self.attr_layers", "is not None", "g == 0", "num_layers"):
        assert gone not in src, gone
    # group 1 runs layers 1, 2, 2 (i is bumped for all but the last), then group 2 layer 0, group 3 layers 0, 1
    order = ["self.group1_layer1(", "self.group1_layer2(", "self.group1_layer2(", "self.group2_layer0(",
             "self.group3_layer0(", "self.group3_layer1("]
    assert src.count("self.group1_layer2(") == 2
    position = 0
    for call in order:
        position = src.index(call, position) + 1
    assert src.count("self.group1_ds1(") == 1 and src.count("self.group3_ds1(") == 1
    assert "self.group2_ds" not in src
    # gates exist for group1 layer 2 (reached twice), group2 layer 0, group3 layer 1
    assert count_ifs(checked.tree) == 4
    assert_no_static_ifs(checked.tree)


class OddLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(4)])

    def forward(self, x):
        for i in range(4):
            x = self.layers[i](x)
            if i % 2 == 1:
                if x.sum() > 0:
                    x = torch.tanh(x)
                else:
                    x = -x
        return x


def test_modulo_test_folds():
    model = build(OddLayers)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert "%" not in checked.source
    assert count_ifs(checked.tree) == 2
    assert_no_static_ifs(checked.tree)


class TrainingBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        x = self.fc(x)
        if self.training:
            x = self.drop(x)
        else:
            x = x * 0.5
        if x.sum() > 0:
            x = x.relu()
        return x


def test_training_flag_folds_in_eval_mode():
    model = build(TrainingBranch)
    checked = check(model, randn_inputs(2, 8), min_paths=2)
    assert "self.training" not in checked.source
    assert "self.drop(" not in checked.source
    assert count_ifs(checked.tree) == 1
    assert_no_static_ifs(checked.tree)


class TrainingInBooleanTest(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        x = self.fc(x)
        if self.training and x.sum() > 0:
            x = x * 100
        if not self.training and x.mean() > 0:
            x = torch.tanh(x)
        return x


def test_training_flag_in_boolean_test():
    model = build(TrainingInBooleanTest)
    checked = check(model, randn_inputs(2, 8), min_paths=2)
    assert "self.training" not in checked.source
    assert "x * 100" not in checked.source
    assert if_tests(checked.tree) == ["x.mean() > 0"]


class OutputFlagsList(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(4)])
        self.is_output = [False, True, False, True]

    def forward(self, x):
        outs = []
        for i in range(4):
            x = self.layers[i](x)
            if self.is_output[i]:
                outs.append(x)
            if x.sum() > 0:
                x = torch.tanh(x)
        return outs


def test_per_layer_flag_list_folds():
    model = build(OutputFlagsList)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert "is_output" not in checked.source
    assert count_ifs(checked.tree) == 4
    assert checked.source.count("outs.append(x)") == 2
    assert_no_static_ifs(checked.tree)


class FlaggedBlock(nn.Module):
    def __init__(self, is_output: bool):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.is_output = is_output

    def forward(self, x):
        return torch.tanh(self.fc(x))


class OutputFlagsOnBlocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([FlaggedBlock(flag) for flag in (True, False, False, True)])
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        logits = None
        for blk in self.blocks:
            x = blk(x)
            if blk.is_output:
                logits = self.head(x)
                if logits[:, 0].sum() > 0:
                    return logits
            x = x * 2
        return logits


def test_per_block_flag_attribute_folds():
    model = build(OutputFlagsOnBlocks)
    checked = check(model, randn_inputs(2, 8), min_paths=2)
    assert "is_output" not in checked.source
    assert count_ifs(checked.tree) == 2
    assert checked.source.count("self.head(") == 2
    # the blocks have no data-dependent control flow: they stay calls
    for i in range(4):
        assert f"self.blocks[{i}](" in checked.source
    assert_no_static_ifs(checked.tree)
