"""A set in forward() is a host value (``hcfg.host_reads``): what tensor code reads of it (``len``,
membership) is computed by the host per call and passed to the sub-DNN as a number. Compiled and
eager agree on inputs that take several paths, in process and through the torch-free host."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch

ATOL = 1e-5


class ExpertUsage(nn.Module):
    """Each block picks one of two experts by its gate (four different choices over the test's
    inputs); the output is scaled by how many different experts the input used, and an input that
    used one expert only is damped (the two paths)."""

    def __init__(self):
        super().__init__()
        self.gates = nn.ModuleList(nn.Linear(8, 1) for _ in range(3))
        self.experts = nn.ModuleList(nn.Linear(8, 8) for _ in range(2))

    def forward(self, x):
        used = set()
        for gate in self.gates:
            choice = int(gate(x).mean() > 0)
            used.add(choice)
            x = torch.tanh(self.experts[choice](x))
        if len(used) == 1:
            x = x * 0.5
        return x / len(used) + (0 in used) * 0.1


class NoRepeatDecoder(nn.Module):
    """Greedy decoding that stops at the first repeated token; the tokens seen so far are a set."""

    def __init__(self, vocab=5, steps=4):
        super().__init__()
        self.steps = steps
        self.proj = nn.Linear(6, vocab)
        self.embed = nn.Linear(1, 6)

    def forward(self, h):
        seen = set()
        for _ in range(self.steps):
            token = int(self.proj(h).argmax())
            if token in seen:
                break
            seen.add(token)
            h = torch.tanh(h + self.embed(torch.ones(1, 1) * token))
        return h * len(seen), len(seen)


class OutlierReset(nn.Module):
    """An outlier empties the set of positions it picked, on one branch only: the other branch
    reads them."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        picked = {int(h.argmax()), int(h.argmin())}
        if h.abs().max() > 3:
            picked.clear()
            return h * (len(picked) + 0.1)
        return h * max(picked) - min(picked)


class PositionBias(nn.Module):
    """Adds the learned bias row of the smallest position among the argmax and argmin; when they
    coincide, the row is doubled."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.bias_rows = nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        h = self.fc(x)
        positions = {int(h.argmax()) % 4, int(h.argmin()) % 4}
        if len(positions) == 1:
            return h + 2 * self.bias_rows[min(positions)]
        return h + self.bias_rows[min(positions)]


def _inputs(shape, count, seed):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator) * (1 + i % 3) for i in range(count)]


@pytest.mark.parametrize("model_class, shape, paths", [(ExpertUsage, (2, 8), 2), (NoRepeatDecoder, (1, 6), 3),
                                                       (OutlierReset, (2, 4), 2), (PositionBias, (2, 4), 2)],
                         ids=["expert-usage", "no-repeat", "outlier-reset", "position-bias"])
def test_a_set_read_by_tensor_code_is_computed_by_the_host(tmp_path, model_class, shape, paths):
    torch.manual_seed(0)
    model = model_class().eval()
    compiled = dycl.compile(model, torch.randn(*shape))
    inputs = _inputs(shape, 40, 1)
    assert assert_equivalent(model, compiled, inputs, min_paths=paths, atol=ATOL) == paths
    compiled.save(tmp_path / "artifact")
    assert assert_equivalent(model, dycl.load(tmp_path / "artifact"), inputs, min_paths=paths, atol=ATOL) == paths
    report = run_host_without_torch(tmp_path / "artifact", model, inputs, ATOL)
    assert report["checked"] == len(inputs) and not report["problems"], report
