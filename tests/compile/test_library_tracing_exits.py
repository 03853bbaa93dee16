"""A library decision on tensor values after an early exit on tracing (transformers'
``_ignore_causal_mask_sdpa``: ``if is_tracing(mask): return ...`` first) is one the exported
graph never makes: it takes the library's general path and agrees with eager whether the
shortcut is taken or not (``hcfg.tracing_guards``). Where the exit does not fire under the
tracer, the decision is made while exporting and is refused, never frozen."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from dycl.rewriter import user_code
from torch import nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import Call, run_host_without_torch
from tests.compile.installed_library import masking


@pytest.fixture(autouse=True)
def installed_library(monkeypatch):
    """dycl treats ``installed_library`` as an installed package: traced, not rewritten."""
    folder = str(Path(masking.__file__).parent)
    monkeypatch.setattr(user_code, "_LIBRARY_PATHS", (*user_code._LIBRARY_PATHS, folder))


class MaskedPooling(nn.Module):
    """Attention pooling over a padding mask, through the library's shortcut; a user branch on top."""

    def __init__(self, prepare=masking.padding_or_none) -> None:
        super().__init__()
        self.prepare = prepare
        self.score = nn.Linear(8, 1)
        self.head = nn.Linear(8, 3)

    def forward(self, x, mask):
        scores = self.score(x).transpose(1, 2)  # (batch, 1, seq)
        weights = masking.masked_scores(scores, self.prepare(mask)).softmax(-1)
        pooled = (weights @ x).squeeze(1)
        if pooled.mean() > 0:
            pooled = pooled * 2
        return self.head(pooled)


def _calls(seed: int) -> list[Call]:
    generator = torch.Generator().manual_seed(seed)
    calls = []
    for length, padded in ((6, 0), (6, 2), (3, 0), (9, 4), (1, 0)) * 2:
        mask = torch.ones(2, length, dtype=torch.long)
        mask[1, length - padded:] = 0
        calls.append(Call((torch.randn(2, length, 8, generator=generator), mask), {}))
    return calls


def test_a_decision_after_an_exit_on_tracing_is_the_graphs_general_path(tmp_path):
    torch.manual_seed(0)
    model = MaskedPooling().eval()
    calls = _calls(1)
    compiled = dycl.compile(model, calls[1].args, dynamic={"x": {1: "seq"}, "mask": {1: "seq"}})
    assert assert_equivalent(model, compiled, [c.args for c in calls], min_paths=2, atol=1e-5) == 2
    report = run_host_without_torch(compiled.save(tmp_path / "pool"), model, calls, atol=1e-5)
    assert report == {"checked": len(calls), "problems": [], "torch_loaded": False}


def test_a_decision_the_exit_does_not_skip_under_the_tracer_is_refused():
    torch.manual_seed(0)
    model = MaskedPooling(masking.wrongly_guarded).eval()
    refused = r"exported graph would keep the example's value at .*masking\.py:25"
    with pytest.raises(dycl.UnsupportedError, match=refused):
        dycl.compile(model, _calls(1)[1].args)
