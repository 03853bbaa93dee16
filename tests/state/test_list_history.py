"""A list on the model that forward() appends to and reads (issue 27: len(), the last item, sum and
max, numbers and tensors): what it reads is what eager reads on every call, not only the first; the
host keeps the list between calls, the in-process model appends to the user's list. Eager and
compiled twins are called in sequence and compared after every call, outputs and lists alike, in
process and through the saved host."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn

import dycl
from dycl.harness.paths import model_source_files, record_path
from dycl.harness.testing import outputs_match
from dycl.harness.testing_host import run_host_without_torch

ATOL = 1e-5


class GateHistory(nn.Module):
    """Keeps the gate value of every call: the first calls warm up, later ones gate on data and
    scale by how many calls there were."""

    def __init__(self, warmup=3):
        super().__init__()
        self.warmup = warmup
        self.gate = nn.Linear(6, 1)
        self.body = nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 6))
        self.gate_history = []

    def forward(self, x):
        g = torch.sigmoid(self.gate(x)).mean()
        self.gate_history.append(g.item())
        if len(self.gate_history) <= self.warmup:
            return self.body(x)
        if g > 0.5:
            return self.body(x) * (1.0 + 0.1 * len(self.gate_history))
        return x


class SkipLog(nn.Module):
    """Logs the activations of the blocks it skips (a tensor per skip, so a different number of
    items per path) and stops skipping once it skipped too often."""

    def __init__(self, budget=6):
        super().__init__()
        self.budget = budget
        self.blocks = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))
        self.skipped = []

    def forward(self, x):
        for block in self.blocks:
            if len(self.skipped) < self.budget:  # noqa: SIM102 - `and` of a tensor test is not compiled yet
                if x.mean() < 0:
                    self.skipped.append(x.detach().mean(0))
                    continue
            x = torch.tanh(block(x))
        return x, len(self.skipped)


class AdaptiveThreshold(nn.Module):
    """Keeps every call's score and takes the sharp path when the score beats the running mean
    of the earlier ones; the output reads the last and the largest score."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.scores = []

    def forward(self, x):
        h = self.fc(x)
        score = h.mean().item()
        if len(self.scores) >= 2 and score > sum(self.scores) / len(self.scores):
            out = h * 2
        else:
            out = -h
        self.scores.append(score)
        return out + self.scores[-1] + max(self.scores) * 0.1


class StreamingResidual(nn.Module):
    """A streaming block that mixes in the last output it kept (kept only when it was positive)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.kept = []

    def forward(self, x):
        h = torch.tanh(self.fc(x))
        if self.kept:
            h = h + 0.5 * self.kept[-1]
        if h.mean() > 0:
            self.kept.append(h.detach())
        return h


def _inputs(seed, count, shape, scales=(1.0, -1.0, 2.0, -2.0, 0.5)):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator) * s + s for s in (scales * count)[:count]]


def _same_items(expected: list, actual: list) -> str | None:
    if len(expected) != len(actual):
        return f"{len(expected)} items expected, got {len(actual)}"
    for i, (a, b) in enumerate(zip(expected, actual)):
        problem = outputs_match(torch.as_tensor(a), torch.as_tensor(b), ATOL)
        if problem is not None:
            return f"item {i}: {problem}"
    return None


def _warm(model, shape):
    """``model`` after two eager calls: its list already holds items when it is compiled (the host
    starts with them; a branch that reads the last item can run on the example)."""
    with torch.no_grad():
        for x in _inputs(2, 2, shape):
            model(x)
    return model


def _build(model_class, example):
    torch.manual_seed(0)
    model = _warm(model_class().eval(), tuple(example.shape))
    twin = copy.deepcopy(model)
    compiled = dycl.compile(model, example)
    return model, twin, compiled


LISTS = [(GateHistory, (2, 6), "gate_history", 3), (SkipLog, (3, 4), "skipped", 3),
         (AdaptiveThreshold, (2, 4), "scores", 2), (StreamingResidual, (1, 4), "kept", 2)]
IDS = ["gate-history", "skip-log", "adaptive-threshold", "streaming-residual"]


@pytest.mark.parametrize("model_class, shape, attribute, paths", LISTS, ids=IDS)
def test_a_list_on_self_is_read_on_every_call(model_class, shape, attribute, paths):
    model, twin, compiled = _build(model_class, torch.randn(*shape))
    assert _same_items(getattr(twin, attribute), getattr(model, attribute)) is None  # compiling changed nothing
    files, seen = model_source_files(twin), set()
    for step, x in enumerate(_inputs(1, 14, shape)):
        with torch.no_grad():
            expected, path = record_path(twin, x, files=files)
            actual = model(x) if step == 5 else compiled(x)  # an eager call in between: compiled continues
        seen.add(path)
        assert outputs_match(expected, actual, ATOL) is None, f"call #{step}"
        problem = _same_items(getattr(twin, attribute), getattr(model, attribute))
        assert problem is None, f"after call #{step}: {problem}"
    assert len(seen) == paths


@pytest.mark.parametrize("model_class, shape, attribute, paths", LISTS, ids=IDS)
def test_saved_host_keeps_the_list_between_calls(tmp_path, model_class, shape, attribute, paths):
    torch.manual_seed(0)
    model = _warm(model_class().eval(), shape)
    twin = copy.deepcopy(model)
    compiled = dycl.compile(model, torch.randn(*shape))
    compiled.save(tmp_path / "artifact")
    inputs = _inputs(3, 12, shape)
    loaded, fresh = dycl.load(tmp_path / "artifact"), copy.deepcopy(twin)
    files, seen = model_source_files(fresh), set()
    parameter = next(s.parameter for s in compiled._result.rewritten.state if s.kind == "list")
    for step, x in enumerate(inputs):
        with torch.no_grad():
            expected, path = record_path(fresh, x, files=files)
        seen.add(path)
        assert outputs_match(expected, loaded(x), ATOL) is None, f"call #{step}"
        assert _same_items(getattr(fresh, attribute), loaded._host.state[parameter]) is None, f"after call #{step}"
    assert len(seen) == paths
    report = run_host_without_torch(tmp_path / "artifact", copy.deepcopy(twin), inputs, ATOL)
    assert report["checked"] == len(inputs) and not report["problems"], report
    assert _same_items(getattr(twin, attribute), getattr(model, attribute)) is None  # the host left it alone
