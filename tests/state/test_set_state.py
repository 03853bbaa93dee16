"""A set on the model that forward() changes (issue 27: a seen-set): the host keeps it between calls
like a dict of numbers, what tensor code reads of it is host work per call (``hcfg.host_reads``), and
the in-process model writes it back into the user's set. Eager and compiled twins are called in
sequence and compared after every call, outputs and sets alike, in process and through the host."""

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


class NoveltyFilter(nn.Module):
    """Refines the logits the first time each label comes up, and divides by how many labels it has
    seen; a label from the caller's blocklist is dropped from the seen set."""

    def __init__(self, blocked=3):
        super().__init__()
        self.blocked = blocked
        self.head = nn.Linear(6, 4)
        self.refine = nn.Linear(4, 4)
        self.seen_labels = set()

    def forward(self, x):
        logits = self.head(x)
        label = int(logits.mean(0).argmax())
        if label not in self.seen_labels:
            self.seen_labels.add(label)
            logits = self.refine(logits)
        self.seen_labels.discard(self.blocked)
        return logits / len(self.seen_labels) if self.seen_labels else logits


class ArgmaxRegistry(nn.Module):
    """Registers the argmax position of every call (``add`` only: also a tensor method's name) and
    doubles the output when the position came up before."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.positions = set()

    def forward(self, x):
        h = self.fc(x)
        position = int(h.argmax())
        if position in self.positions:
            h = h * 2
        self.positions.add(position)
        return h * len(self.positions)


def _inputs(seed, count):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(2, 6, generator=generator) * (1 + i % 4) - (i % 3) for i in range(count)]


@pytest.mark.parametrize("model_class, attribute", [(NoveltyFilter, "seen_labels"), (ArgmaxRegistry, "positions")],
                         ids=["novelty", "argmax-registry"])
def test_a_seen_set_on_self_is_kept_between_calls(tmp_path, model_class, attribute):
    torch.manual_seed(0)
    model = model_class().eval()
    pristine = copy.deepcopy(model)
    twin, fresh = copy.deepcopy(model), copy.deepcopy(model)
    compiled = dycl.compile(model, torch.randn(2, 6))
    assert getattr(model, attribute) == set()  # compiling changed nothing
    compiled.save(tmp_path / "artifact")
    inputs = _inputs(1, 16)
    files, paths, kept = model_source_files(twin), set(), getattr(model, attribute)
    for step, x in enumerate(inputs):
        with torch.no_grad():
            expected, path = record_path(twin, x, files=files)
            actual = model(x) if step == 6 else compiled(x)  # an eager call in between: compiled continues
        paths.add(path)
        assert outputs_match(expected, actual, ATOL) is None, f"call #{step}"
        assert getattr(model, attribute) == getattr(twin, attribute), f"after call #{step}"
    assert len(paths) == 2 and getattr(model, attribute) is kept and len(kept) >= 2
    loaded, parameter = dycl.load(tmp_path / "artifact"), compiled._result.rewritten.state[0].parameter
    for step, x in enumerate(inputs):
        with torch.no_grad():
            expected = fresh(x)
        assert outputs_match(expected, loaded(x), ATOL) is None, f"loaded, call #{step}"
        assert loaded._host.state[parameter] == getattr(fresh, attribute), f"loaded, after call #{step}"
    # the torch-free host, one process calling in sequence from the state at compile time
    report = run_host_without_torch(tmp_path / "artifact", pristine, inputs, ATOL)
    assert report["checked"] == len(inputs) and not report["problems"], report
