"""A symbolic run's guards are checked at the example's sizes against the values the
statements computed for real there (``hcfg.symbolic``: ``observed``), not by a third,
fake run; where the real values disagree with the symbolic result, the run is refused."""

from __future__ import annotations

import torch
import torch.nn as nn
from dycl.hcfg import symbolic
from dycl.hcfg.symbolic import SymbolicShapes, SymbolicTensor

import dycl
from dycl.harness.testing import assert_equivalent

CODE = compile("y = x.squeeze(0) * 2", "<test>", "exec")


def _batch_one_mirror() -> tuple[SymbolicShapes, dict]:
    shapes = SymbolicShapes()
    return shapes, {"x": shapes.declare(torch.randn(1, 4), {0: "batch"})}


def test_the_real_values_stand_in_for_the_probe_at_the_example(monkeypatch):
    probes = []
    probe = symbolic._probe
    monkeypatch.setattr(symbolic, "_probe", lambda *args: probes.append(args) or probe(*args))
    shapes, mirror = _batch_one_mirror()
    code = compile("y = x.tanh() * 2", "<test>", "exec")  # tanh: no direct rule (hcfg.shape_rules)
    assert shapes.run_tensor_code(code, mirror, {"x"}, {"y"}, observed={"y": torch.zeros(1, 4)})
    assert isinstance(mirror["y"], SymbolicTensor) and str(mirror["y"].shape[0]) == "batch"
    assert probes == []  # the run guarded Ne(batch, 1), failing at the example 1: the real values decided
    shapes, mirror = _batch_one_mirror()
    assert shapes.run_tensor_code(code, mirror, {"x"}, {"y"})  # without them, a fake run at the example decides
    assert len(probes) == 1


def test_real_values_that_disagree_refuse_the_symbolic_run():
    # at the hint (3) squeeze(0) keeps the batch; at the example (1) it drops it
    shapes, mirror = _batch_one_mirror()
    assert not shapes.run_tensor_code(CODE, mirror, {"x"}, {"y"}, observed={"y": torch.zeros(4)})
    assert "y" not in mirror and shapes.failures
    shapes, mirror = _batch_one_mirror()
    assert not shapes.run_tensor_code(CODE, mirror, {"x"}, {"y"})  # the fake probe says the same


class SqueezeHead(nn.Module):
    """Someone's head that squeezes the batch away, as is common in single-sample code."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 3)

    def forward(self, x):
        y = self.proj(x).squeeze(0)
        if y.sum() > 0:
            return y.softmax(-1)
        return torch.tanh(y) - 1


def test_a_batch_one_example_compiles_what_eager_computes():
    torch.manual_seed(0)
    model = SqueezeHead().eval()
    compiled = dycl.compile(model, torch.randn(1, 4))
    inputs = [torch.randn(1, 4, generator=torch.Generator().manual_seed(seed)) for seed in range(12)]
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5) == 2
