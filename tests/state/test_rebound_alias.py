"""A buffer updated in place through a local name that is bound to it again before each update
(issue 27, found by the fuzzer): every binding is to the same buffer, so the name stands for it
(``rewriter.state_locals``) and the updates reach the compiled model's state, in process and in
the saved host."""

from __future__ import annotations

import copy

import torch
import torch.nn as nn

import dycl
from dycl.harness.paths import model_source_files, record_path
from dycl.harness.testing import outputs_match
from dycl.harness.testing_host import run_host_without_torch

ATOL = 1e-5


class DecayingMemory(nn.Module):
    """A memory that decays faster after a surprising input, then takes in the new input."""

    def __init__(self, dim: int = 5):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("memory", torch.zeros(dim))

    def forward(self, x):
        h = torch.tanh(self.proj(x))
        if (h.mean(0) - self.memory).abs().max() > 0.5:
            mem = self.memory
            mem.mul_(0.5)
        mem = self.memory
        mem.mul_(0.9).add_(h.mean(0), alpha=0.1)
        return h + self.memory


def _inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(4)
    return [torch.randn(3, 5, generator=generator) * s for s in (0.1, 3.0, 0.1, 0.1, 4.0, 0.2, 0.1, 2.0)]


def test_an_alias_bound_again_to_the_same_buffer(tmp_path):
    torch.manual_seed(0)
    model = DecayingMemory().eval()
    twin, fresh = copy.deepcopy(model), copy.deepcopy(model)
    compiled = dycl.compile(model, torch.randn(3, 5))
    files, paths = model_source_files(twin), set()
    for step, x in enumerate(_inputs()):
        with torch.no_grad():
            expected, path = record_path(twin, x, files=files)
            assert outputs_match(expected, compiled(x), ATOL) is None, f"call #{step}"
        assert outputs_match(twin.memory, model.memory, ATOL) is None, f"after call #{step}"
        paths.add(path)
    assert len(paths) == 2  # decayed faster or not
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), fresh, _inputs(), ATOL)
    assert report["checked"] == len(_inputs()) and not report["problems"], report
