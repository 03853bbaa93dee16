"""A test on a symbolic size — an ``assert``, a ``raise`` under an ``if`` — is decided by the
host on every call, never the example's outcome baked in (issue 26, item 8): compiled with the
batch symbolic, each model raises where eager raises and agrees where eager returns, in-process,
loaded from its artifact, and in the torch-free host."""

from __future__ import annotations

import json
import linecache
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import dycl
from dycl.harness.testing_host import run_host_without_torch
from tests.dynamic.outcomes import assert_same_outcomes


def _returning(model, inputs):
    returned = []
    for args in inputs:
        try:
            model(*args)
        except Exception:  # noqa: BLE001 - eager refuses it: checked by assert_same_outcomes
            continue
        returned.append(args)
    return returned


def _check(model, compiled, inputs, tmp_path, paths):
    compiled.save(tmp_path / "artifact")
    loaded = dycl.load(tmp_path / "artifact")
    assert assert_same_outcomes(model, {"compiled": compiled, "loaded": loaded}, inputs) == paths
    returned = _returning(model, inputs)
    result = run_host_without_torch(tmp_path / "artifact", model, returned, atol=1e-5)
    assert result["checked"] == len(returned) > 0 and not result["problems"], result


class PairPool(nn.Module):
    """Averages neighbouring positions; checks its input as people do, with asserts and a raise."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(6, 4)

    def forward(self, x):
        assert x.dim() == 3, "expected (batch, seq, features)"
        assert x.size(1) % 2 == 0, f"sequence length {x.size(1)} must be even"
        h = x.view(x.size(0), x.size(1) // 2, 2, -1).mean(2)
        if h.abs().amax() > 50:
            raise ValueError("activations diverged")
        return self.proj(h)


def test_asserts_and_a_raise_on_sizes_and_values_are_host_checks(tmp_path):
    torch.manual_seed(0)
    model = PairPool().eval()
    compiled = dycl.compile(model, torch.randn(2, 4, 6), dynamic={"x": {0: "batch", 1: "seq"}})
    inputs = [(torch.randn(b, s, 6) * scale,) for b in (1, 3) for s in (2, 3, 4, 7) for scale in (1.0, 100.0)]
    # paths: returned; AssertionError (odd length); ValueError (diverged)
    _check(model, compiled, inputs, tmp_path, paths=3)


def _exportdb(name):
    try:
        module = __import__(f"torch._export.db.examples.{name}", fromlist=["model"])
    except ImportError:
        return None
    return module.model


@pytest.mark.parametrize("name, paths", [("dynamic_shape_assert", 2), ("list_contains", 2)])
def test_exportdb_size_asserts_are_checked_per_call(name, paths, tmp_path):
    model = _exportdb(name)
    assert model is not None, f"this torch has no ExportDB example {name}"
    model = type(model)().eval()
    compiled = dycl.compile(model, torch.randn(3, 2))  # the batch is symbolic by default
    inputs = [(torch.randn(b, 2),) for b in (1, 2, 3, 4, 5, 7, 8)]
    _check(model, compiled, inputs, tmp_path, paths)


# -- item 6: a shape test is explored with shapes on which its branch is taken --------------------


class SqueezeSingle(nn.Module):
    """Drops the batch dim for a single sample, as serving code often does."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        h = self.fc(x)
        if x.shape[0] == 1:
            h = h.squeeze(0)
        return torch.tanh(h) * 2


class SqueezeFew(SqueezeSingle):
    def forward(self, x):
        h = self.fc(x)
        if len(x) < 2:
            h = h.squeeze(0)
        return torch.tanh(h) * 2


class DecodeStep(nn.Module):
    """One token (seq == 1) returns per-sample logits, a sequence returns per-token ones."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        h = torch.relu(self.proj(x))
        if x.size(1) == 1:
            h = h.squeeze(1)
        elif h.mean() > 0.3:
            h = h * 0.5
        return self.head(h).log_softmax(-1)


@pytest.mark.parametrize("batches, example, dynamic, paths", [
    ("batch", (2, 4), True, 2),
    ("few", (3, 4), True, 2),
    ("seq", (2, 5, 4), {"x": {0: "batch", 1: "seq"}}, 3),
])
def test_a_size_test_the_example_cannot_take_is_explored_at_its_size(batches, example, dynamic, paths, tmp_path):
    torch.manual_seed(1)
    model = {"batch": SqueezeSingle, "few": SqueezeFew, "seq": DecodeStep}[batches]().eval()
    compiled = dycl.compile(model, torch.randn(*example), dynamic=dynamic)
    if batches != "seq":
        inputs = [(torch.randn(b, 4),) for b in (1, 2, 3, 1, 6)]
    else:
        inputs = [(torch.randn(b, s, 4) + shift,) for b in (1, 3) for s in (1, 2, 5) for shift in (-1.0, 1.0)]
    _check(model, compiled, inputs, tmp_path, paths)


# -- item 9: a size that comes from data is symbolic whatever dynamic= says -----------------------


class PairUp(nn.Module):
    """Pairs up the positive entries when there is an even number of them."""

    def forward(self, x):
        y = x[x > 0]
        if y.shape[0] % 2 == 0:
            return y.reshape(y.shape[0] // 2, -1)
        return y.reshape(1, -1)


class KeepConfident(nn.Module):
    """Post-processing as detectors write it: keep the confident boxes, sort them by score."""

    def forward(self, boxes, scores):
        keep = scores > 0.5
        boxes, scores = boxes[keep], scores[keep]
        if scores.numel() == 0:
            return boxes, scores
        order = scores.argsort(descending=True)
        return boxes[order] * 2, scores[order]


def test_a_size_from_boolean_indexing_is_symbolic_under_dynamic_false(tmp_path):
    model = PairUp().eval()
    compiled = dycl.compile(model, torch.tensor([1.0, -1.0, 2.0, 3.0, -2.0, 4.0, -3.0, -4.0]), dynamic=False)
    generator = torch.Generator().manual_seed(3)
    inputs = [(torch.randn(8, generator=generator),) for _ in range(16)]
    _check(model, compiled, inputs, tmp_path, paths=2)


def test_a_graph_after_boolean_indexing_takes_any_count_under_dynamic_false(tmp_path):
    model = KeepConfident().eval()
    generator = torch.Generator().manual_seed(4)
    compiled = dycl.compile(model, (torch.rand(10, 4, generator=generator), torch.rand(10, generator=generator)),
                            dynamic=False)
    inputs = [(torch.rand(10, 4, generator=generator), torch.rand(10, generator=generator) * scale)
              for scale in (0.4, 1.0, 1.0, 1.5, 2.0, 0.5)]
    _check(model, compiled, inputs, tmp_path, paths=2)


class PairUpInline(nn.Module):
    def forward(self, x):
        y = x[x > 0]
        return y.reshape(y.shape[0] // 2, -1) if y.shape[0] % 2 == 0 else y.reshape(1, -1)


def test_a_decision_on_a_size_from_data_inside_one_graph_is_never_the_examples(tmp_path):
    """Compiled correctly (the conditional expression as a condition), or refused at its line."""
    model = PairUpInline().eval()
    try:
        compiled = dycl.compile(model, torch.tensor([1.0, -1.0, 2.0, 3.0, -2.0, 4.0, -3.0, -4.0]), dynamic=False)
    except dycl.UnsupportedError as error:
        assert error.location is not None and error.location.path == __file__, error
        assert "y.shape[0] % 2 == 0" in linecache.getline(__file__, error.location.line), error
        return
    generator = torch.Generator().manual_seed(3)
    _check(model, compiled, [(torch.randn(8, generator=generator),) for _ in range(16)], tmp_path, paths=2)


def test_a_mixtral_style_block_with_unused_experts_compiles_under_dynamic_false(tmp_path):
    # a subprocess: the regression this guards against killed the process (SIGFPE in torch's exporter)
    completed = subprocess.run([sys.executable, "-m", "tests.dynamic.moe_block", str(tmp_path / "artifact")],
                               capture_output=True, text=True, timeout=900, cwd=Path(__file__).parents[2],
                               env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert completed.returncode == 0, f"rc {completed.returncode}: {completed.stderr[-3000:]}"
    summary = json.loads(completed.stdout.strip().splitlines()[-1])
    assert summary["checked"] == 24 and summary["expert_sets"] >= 3 and summary["paths"] >= 3, summary
