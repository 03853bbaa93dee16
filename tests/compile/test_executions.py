"""How often one compile runs the model, stage by stage (``tests.compile.executions``):
the explore walk records what every path returns, so the emit stage runs nothing to learn
the outputs (it used to run the host twice on eager sub-DNNs: at the example's sizes and
at twice them). The compiled model still gives what eager gives, on several paths, in
process and through the torch-free host, and the manifest still describes the outputs."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import dycl
from dycl.harness.testing import assert_equivalent
from tests.compile.executions import by_stage, count_executions, first_leaf


class EarlyExitMLP(nn.Module):
    """An early-exit classifier as one writes it by hand: a confident first head returns at once."""

    def __init__(self, threshold: float = 0.6) -> None:
        super().__init__()
        self.stem = nn.Linear(8, 16)
        self.head1 = nn.Linear(16, 3)
        self.body = nn.Sequential(nn.ReLU(), nn.Linear(16, 16), nn.Tanh())
        self.head2 = nn.Linear(16, 3)
        self.threshold = threshold

    def forward(self, x):
        h = F.relu(self.stem(x))
        logits = self.head1(h)
        if F.softmax(logits, dim=-1).max() > self.threshold:
            return logits, 1
        h = self.body(h)
        return self.head2(h) + logits, 2


def _inputs(count: int = 24) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(5)
    return [torch.randn(1, 8, generator=generator) * scale for scale in (0.1, 4.0) for _ in range(count // 2)]


def test_emit_runs_nothing_and_the_model_runs_once_per_stage_before_it(monkeypatch, tmp_path):
    torch.manual_seed(0)
    model = EarlyExitMLP().eval()
    stem = first_leaf(model)
    assert stem is model.stem
    with count_executions(stem, monkeypatch) as counts:
        compiled = dycl.compile(model, _inputs()[0], check=False)
    stages = by_stage(counts)
    assert "emit" not in stages, stages  # the output table comes from the exploration
    assert stages["explore"] == {"fake": 1}, stages  # one symbolic run; the concrete one is the build's
    assert stages["build"] == {"real": 1}, stages
    real = sum(kinds.get("real", 0) for stage, kinds in stages.items() if stage not in ("batch_check", "compile"))
    assert real <= 2, stages  # rewrite's reference, build's walk
    # the stem's sub-DNN: exported once, and run twice by the determinism check (dycl/export/determinism.py)
    assert stages["compile"] == {"export": 1, "real": 2}, stages
    assert compiled.manifest["outputs"] == [
        {"name": "output_0", "kind": "tensor", "dtype": "float32", "example_shape": [1, 3], "shape": ["batch", 3]},
        {"name": "output_1", "kind": "int"}]
    inputs = _inputs()
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5) == 2
    loaded = dycl.load(compiled.save(tmp_path / "net"))
    assert assert_equivalent(model, loaded, inputs, min_paths=2, atol=1e-5) == 2


class OneSampleExit(EarlyExitMLP):
    """The same early exit written for one sample at a time: the test is the truth of a
    one-element tensor, which eager PyTorch refuses at batch 2 (so the batch compiles static)."""

    def forward(self, x):
        h = F.relu(self.stem(x))
        logits = self.head1(h)
        if F.softmax(logits, dim=-1).max(dim=-1).values > self.threshold:
            return logits
        return self.head2(self.body(h)) + logits


def test_a_static_batch_is_decided_after_the_build_walk_and_compiled_once(monkeypatch, tmp_path):
    """The batch check runs between optimize and explore (no stage before explore reads
    ``dynamic``): the model's reference and build runs happen once, the exploration and the
    exports once, for the static batch; the result is the compile made with dynamic=False."""
    torch.manual_seed(0)
    model = OneSampleExit().eval()
    example = _inputs()[0]
    with count_executions(first_leaf(model), monkeypatch) as counts, \
            pytest.warns(dycl.SpecialisationWarning, match="fails at batch 2"):
        compiled = dycl.compile(model, example, check=False)
    stages = by_stage(counts)
    assert stages["rewrite"] == {"real": 1} and stages["build"] == {"real": 1}, stages
    assert stages["explore"] == {"fake": 1}, stages  # the batch is decided before: only the static exploration
    # the stem's sub-DNN: exported once (its trace dataflow-checked) and run twice by the determinism check
    assert stages["compile"] == {"export": 1, "real": 2}, stages
    assert compiled._result.front_end is None  # the build walk's values are not kept
    static = dycl.compile(model, example, check=False, dynamic=False)
    assert compiled.host_source == static.host_source
    assert compiled.manifest["inputs"] == static.manifest["inputs"]
    assert compiled.manifest["inputs"][0]["shape"] == [1, 8]
    inputs = _inputs()
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5) == 2
    loaded = dycl.load(compiled.save(tmp_path / "net"))
    assert assert_equivalent(model, loaded, inputs, min_paths=2, atol=1e-5) == 2
