"""Lists, dicts and sets changed inside forward(): every alias sees every change.

Each model is written the way PyTorch code usually is; each runs on inputs
that take at least two paths and must equal eager execution — rewritten
in-process, compiled with ONNX Runtime, and through the saved host in a
process without torch — or fail with ``UnsupportedError`` at the user's line.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import torch
from rewrite_checks import build, check, randn_inputs
from torch import nn

import dycl
from dycl import rewriter
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch

ATOL = 1e-4


def check_compiled(model: nn.Module, inputs: list, min_paths: int, tmp_path: Path) -> int:
    """The rewrite, the ONNX Runtime model and its torch-free host all equal eager."""
    paths = check(model, inputs, min_paths=min_paths).paths
    compiled = dycl.compile(model, inputs[0], backend="onnxruntime")
    assert assert_equivalent(model, compiled, inputs, min_paths=min_paths, atol=ATOL) == paths
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, inputs, ATOL)
    assert report["checked"] == len(inputs) and report["problems"] == [], report
    return paths


def line_of(cls: type, text: str) -> int:
    """The file line of the first line of ``cls``'s source containing ``text``."""
    lines, first = inspect.getsourcelines(cls)
    return first + next(i for i, line in enumerate(lines) if text in line)


def assert_refused(model: nn.Module, construct: str, text: str) -> None:
    with pytest.raises(rewriter.UnsupportedError) as error:
        rewriter.rewrite(model)
    assert construct in error.value.construct
    assert error.value.location is not None
    assert error.value.location.path == inspect.getsourcefile(type(model))
    assert error.value.location.line == line_of(type(model), text)
    assert error.value.hint


class ConfigDict(nn.Module):
    """A per-call config dict adjusted by methods, then used as a loop bound and a scale."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(4)])

    def forward(self, x):
        cfg = {"depth": 1, "scale": 1.0}
        cfg.update(depth=3)
        cfg.setdefault("scale", 5.0)
        cfg.setdefault("shift", 0.5)
        shift = cfg.pop("shift")
        for i in range(cfg["depth"]):
            x = torch.tanh(self.blocks[i](x)) * cfg["scale"]
        if x.sum() > 0:
            x = x + shift
        return x, len(cfg)


def test_dict_update_setdefault_pop(tmp_path):
    model = build(ConfigDict)
    assert check_compiled(model, randn_inputs(2, 8), 2, tmp_path) == 2
    source = rewriter.rewrite(model).plain_source
    assert source.count("self.blocks[") == 3  # depth 3 after update(), not 1


class AliasedOutputs(nn.Module):
    """Features collected through a second name; the length is read through the first."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])
        self.head = nn.Linear(8, 8)

    def forward(self, x):
        features = []
        sink = features
        for layer in self.layers:
            x = layer(x)
            sink.append(x)
        total = torch.zeros_like(x)
        for i in range(len(features)):
            total = total + features[i]
        if total.mean() > 0:
            sink.append(self.head(total))
        return features[-1], len(features)


def test_list_alias_append_then_len(tmp_path):
    model = build(AliasedOutputs)
    assert check_compiled(model, randn_inputs(2, 8), 2, tmp_path) == 2


class ItemWrites(nn.Module):
    """Item writes into a dict and a list of counters, and into a list of tensors."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        stats = {"calls": 0, "scale": 1.0}
        stats["calls"] = stats["calls"] + 1
        stats["scale"] = 0.5
        counts = [0, 0, 0]
        for i in range(3):
            counts[i] += i + 1
        feats = [x, self.fc(x)]
        if feats[1].sum() > 0:
            feats[0] = feats[0] * 2
        else:
            feats[1] += 1
        return feats[0] * stats["scale"] + feats[1] * counts[2], stats["calls"], len(feats)


def test_item_write_and_augmented_item_write(tmp_path):
    model = build(ItemWrites)
    assert check_compiled(model, randn_inputs(2, 8), 2, tmp_path) == 2
    source = rewriter.rewrite(model).plain_source
    assert "feats[1] += 1" in source and "stats" not in source and "counts" not in source  # folded away


class Deletions(nn.Module):
    """``del`` of a dict key and of a list item; the list's length bounds a loop."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])

    def forward(self, x):
        outs = []
        for layer in self.layers:
            x = layer(x)
            outs.append(x)
        del outs[0]
        cache = {"tmp": 1, "keep": 2}
        del cache["tmp"]
        acc = torch.zeros_like(x)
        for i in range(len(outs)):
            if outs[i].sum() > 0:
                acc = acc + outs[i]
        return acc, len(outs), len(cache)


def test_del_item(tmp_path):
    model = build(Deletions)
    assert check_compiled(model, randn_inputs(2, 8), 3, tmp_path) >= 3


class SliceWrites(nn.Module):
    """Slice writes: a static list stays static; a list of tensors keeps its items."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])

    def forward(self, x):
        widths = [1, 1, 1, 1]
        widths[1:3] = [2, 3]
        outs = [x, x, x]
        outs[1:] = [self.layers[0](x)]
        h = outs[-1] * widths[2]
        if h.sum() > 0:
            h = self.layers[1](h)
        return h, len(outs), sum(widths)


def test_slice_write(tmp_path):
    model = build(SliceWrites)
    assert check_compiled(model, randn_inputs(2, 8), 2, tmp_path) == 2


class SkipSet(nn.Module):
    """A set of skipped layers built with add/discard decides which layers run."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(4)])

    def forward(self, x):
        skip = set()
        skip.add(1)
        skip.add(3)
        skip.discard(3)
        for i, layer in enumerate(self.layers):
            if i in skip:
                continue
            y = layer(x)
            if y.sum() > 0:
                x = y
        return x, len(skip)


def test_set_add_discard(tmp_path):
    model = build(SkipSet)
    assert check_compiled(model, randn_inputs(2, 8), 3, tmp_path) >= 3
    assert rewriter.rewrite(model).plain_source.count("self.layers[") == 3


class ExtendThroughAlias(nn.Module):
    """``+=`` on a list changes the object, so the other name sees it."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        history = [x]
        view = history
        history += [self.fc(x), x * 2]
        acc = torch.zeros_like(x)
        for item in view:
            if item.mean() > 0:
                acc = acc + item
        return acc, len(view)


def test_in_place_add_seen_through_alias(tmp_path):
    model = build(ExtendThroughAlias)
    assert check_compiled(model, randn_inputs(2, 8), 3, tmp_path) >= 3


class GateAppends(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x, outs):
        h = self.fc(x)
        if h.sum() > 0:
            outs.append(h)
        return h


class HelperAppends(nn.Module):
    """A submodule appends to the caller's list under a data-dependent test."""

    def __init__(self):
        super().__init__()
        self.gates = nn.ModuleList([GateAppends() for _ in range(3)])

    def forward(self, x):
        outs = [x]
        for gate in self.gates:
            x = gate(x, outs)
        return outs[-1], len(outs)


def test_list_changed_by_an_inlined_callee(tmp_path):
    model = build(HelperAppends)
    assert check_compiled(model, randn_inputs(2, 8), 4, tmp_path) >= 4


def _record(items, value):
    items.append(value)
    items.append(value * 2)


class OpaqueHelper(nn.Module):
    """A branch-free helper (kept as a call) appends to a list passed to it."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        seen = [x]
        alias = seen
        _record(seen, self.fc(x))
        if x.sum() > 0:
            x = x + 1
        return x, len(alias)


def test_list_passed_to_unknown_code_becomes_dynamic():
    model = build(OpaqueHelper)
    checked = check(model, randn_inputs(2, 8), min_paths=2)
    assert "len(alias)" in checked.source


class BranchMutatesDict(nn.Module):
    """A dict changed on one path only is read by the host after the join."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        opts = {"mode": 0}
        view = opts
        h = self.fc(x)
        if h.sum() > 0:
            opts["mode"] = 1
        return h, view["mode"]


def test_dict_changed_on_one_path_is_read_at_run_time(tmp_path):
    model = build(BranchMutatesDict)
    assert check_compiled(model, randn_inputs(2, 8), 2, tmp_path) == 2
    assert "opts['mode']" in rewriter.rewrite(model).plain_source.replace('"', "'")  # one name for the dict


class StateOnSelf(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.state = {"calls": 0}

    def forward(self, x):
        s = self.state
        s["calls"] = s["calls"] + 1
        return self.fc(x)


class HistoryOnSelf(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.history = []

    def forward(self, x):
        h = self.fc(x)
        self.history.append(h)
        return h


class ExtendsOnSelf(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.history = []

    def forward(self, x):
        h = self.fc(x)
        self.history.extend([h])
        return h


def test_container_on_self_changed_in_forward_is_threaded_or_refused():
    # item writes to a dict of numbers and appends to a list of tensors are module state the rewrite
    # threads (rewriter.state_threading; tests/state checks them compiled); other container methods
    # are refused by the module-state check (rewriter/state_slots.py), before container tracking sees them
    counted = rewriter.rewrite(build(StateOnSelf))
    assert [(s.path, s.kind) for s in counted.state] == [("state", "dict")]
    assert "return ((self.fc(x)), (state_state, ))" in counted.plain_source
    logged = rewriter.rewrite(build(HistoryOnSelf))
    assert [(s.path, s.kind) for s in logged.state] == [("history", "list")]
    assert "state_history = []" in logged.plain_source and "state_history.append(h)" in logged.plain_source
    assert_refused(build(ExtendsOnSelf), "write to module state", "self.history.extend([h])")


class DefaultArgument(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x, seen=[]):  # noqa: B006 - the mutable default is the point
        seen.append(1)
        return self.fc(x) * len(seen)


def test_mutable_default_argument_changed_is_refused():
    assert_refused(build(DefaultArgument), "outlives the call", "seen.append(1)")


class ChangeAndRead(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        outs = [x, self.fc(x)]
        last = outs.pop() + len(outs)
        return last


def test_change_and_read_in_one_statement_is_refused():
    assert_refused(build(ChangeAndRead), "changed and read in the same statement", "outs.pop() + len(outs)")


class NestedLists(nn.Module):
    """A list inside a dict changed through the dict; the outer name sees it."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])

    def forward(self, x):
        plan = {"order": [0]}
        order = plan["order"]
        plan["order"].append(2)
        order.append(1)
        for i in plan["order"]:
            x = self.layers[i](x)
            if x.sum() < 0:
                x = -x
        return x, len(order)


def test_nested_list_changed_through_either_name(tmp_path):
    model = build(NestedLists)
    assert check_compiled(model, randn_inputs(2, 8), 3, tmp_path) >= 3


class GrowWhileIterating(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        queue = [x]
        for item in queue:
            if len(queue) < 3:
                queue.append(self.fc(item))
        return queue[-1]


class RebindWhileIterating(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        outs = [x, x * 2]
        for o in outs:
            outs = [self.fc(o)]
        return outs[0]


def test_loop_over_a_container_it_changes_or_rebinds_is_refused():
    assert_refused(build(GrowWhileIterating), "a for loop over a container that the loop changes",
                   "for item in queue:")
    assert_refused(build(RebindWhileIterating), "which the loop assigns", "for o in outs:")


class ListPerBranch(nn.Module):
    """A list built on each path, with the same length, then iterated."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        if x.mean() > 0:
            parts = [x, self.fc(x)]
        else:
            parts = [self.fc(x), x]
        out = torch.zeros_like(x)
        for p in parts:
            if p.sum() > 0:
                out = out + p
        return out, len(parts)


def test_list_of_one_length_on_both_paths_stays_iterable(tmp_path):
    model = build(ListPerBranch)
    assert check_compiled(model, randn_inputs(2, 8), 4, tmp_path) >= 4


class ComprehensionOverOutputs(nn.Module):
    """A comprehension reads a list of outputs; the list's length still bounds a loop."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])

    def forward(self, x):
        outs = []
        for layer in self.layers:
            x = layer(x)
            outs.append(x)
        means = [o.mean() for o in outs]
        best = x
        for i in range(len(outs)):
            if means[i] > 0:
                best = outs[i]
        return best, len(means)


def test_comprehension_over_a_list_keeps_its_length():
    model = build(ComprehensionOverOutputs)
    assert check(model, randn_inputs(2, 8), min_paths=3).paths >= 3
