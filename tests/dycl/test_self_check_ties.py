"""The self-check skips a derived input whose eager answer float32 rounding decides (note "ties
on derived inputs" in ``dycl.harness.conditioning``): the example shifted by 10 spreads saturates
``tanh`` so that a router's ``argmax`` compares values equal to the last bit, which ONNX Runtime
and torch round differently. Found by the fuzzer (seed 4242, program 208, kept as
``tests/fuzz_regressions/test_fuzz_s4242_p208_onnxruntime.py``): a ``SelfCheckError`` that called
it "a dycl bug" although the compiled model agrees with eager wherever eager is stable."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import dycl
from dycl.harness import self_check
from dycl.harness.conditioning import decided_by_rounding
from dycl.harness.self_check import SelfCheckError, difference
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch

#: the fuzzer's example (exact float32 values: the tie is in their last bits once shifted and squashed)
EXAMPLE = torch.tensor([
    [-0.9499470591545105, -0.5374576449394226, 1.1002618074417114, 0.3963228464126587, 0.07894193381071091],
    [-1.5436910390853882, 1.4476354122161865, -0.8739938735961914, -1.3590658903121948, -0.6383640766143799],
    [-0.6915985345840454, 0.003944281954318285, -0.8217976689338684, 1.1117035150527954, -0.6808139085769653]])


class ScoreRouter(nn.Module):
    """Squashes the scores, routes the batch by the first row's best score, then by the mean's;
    counts its calls (module state that forward writes: the self-check restores it between runs)."""

    def __init__(self):
        super().__init__()
        self.stats = {"calls": 0}
        self.blocks = nn.ModuleList([nn.Linear(5, 5), nn.Tanh(), nn.Sequential(nn.Linear(5, 5), nn.ReLU())])

    def forward(self, x):
        self.stats["calls"] = self.stats["calls"] + 1
        x = torch.tanh(x)
        if x.size(0) > 1:
            x = x - x.mean(0, keepdim=True) * 0.5
        choice = int(x[0].argmax()) % len(self.blocks)
        x = -(self.blocks[choice](x) + choice * 0.1)
        return self.blocks[min(int(x.mean(0).argmax()), 2)](x)


def _router() -> ScoreRouter:
    """With the fuzzer's program's weights (its seed; it made four layers first that it never used)."""
    torch.manual_seed(207982670)
    for _ in range(4):
        nn.Linear(5, 5)
    return ScoreRouter().eval()


def test_a_tie_on_a_saturated_derived_input_is_no_evidence_and_the_model_compiles(tmp_path):
    model = _router()
    compiled = dycl.compile(model, EXAMPLE)
    generator = torch.Generator().manual_seed(4)
    inputs = [torch.randn(1 + i % 3, 5, generator=generator) * (0.3, 1.0, 2.0)[i % 3] for i in range(18)]
    assert assert_equivalent(model, compiled, inputs, atol=1e-5) >= 2  # a batch of one, and of more
    with torch.no_grad():  # the routes the compiled model took alike: more than one block picked first
        assert len({int(torch.tanh(x)[0].argmax()) if len(x) == 1 else None for x in inputs} - {None}) >= 2
    report = run_host_without_torch(compiled.save(tmp_path / "router"), model, inputs, 1e-5)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


def test_without_the_rounding_check_the_self_check_blames_dycl(monkeypatch):
    """The test above goes through the tie: with the check answering "not rounding", the
    self-check raises on the shifted example, as before the fix."""
    monkeypatch.setattr(self_check, "decided_by_rounding", lambda *args: False)
    with pytest.raises(SelfCheckError, match="shifted by 10 times its spread"):
        dycl.compile(_router(), EXAMPLE)


def test_only_the_saturated_input_is_decided_by_rounding():
    model = _router()
    for shift, tie in [(0.0, False), (3.0, False), (10.0, True)]:
        x = EXAMPLE + shift * EXAMPLE.std()
        with torch.no_grad():
            expected = model(x)
        assert decided_by_rounding(model, (x,), {}, expected, difference) is tie, shift
    assert not decided_by_rounding(model.double(), (EXAMPLE.double(),), {}, model(EXAMPLE.double()), difference)
