"""The builtin ``max(a, b)``/``min(a, b)`` over values from data (``rewriter.choices``): CPython
compares the items (``bool(b > a)``), a choice made on the host; each outcome is compiled, in
forward and in a helper it calls (``rewriter.callees.converts`` inlines such a helper). The
compiled model agrees with eager in process and as a torch-free host on inputs taking every
outcome; ``max`` over one sequence without a key is still refused at the user's line."""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import dycl
from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host


def _check(model: nn.Module, inputs: list, choice, tmp_path) -> int:
    """Compile ``model`` on the first input, compare on all, in process and as a host; the
    number of distinct outcomes ``choice`` (computed eagerly) takes."""
    assert_agrees_in_process_and_as_host(model, inputs, tmp_path, 1e-5)
    with torch.no_grad():
        return len({choice(x) for x in inputs})


def safe_one_hot(indexes, max_length):
    """As ``mixture_of_experts`` writes it: ``F.one_hot`` fails on an index past ``num_classes``."""
    max_index = indexes.max() + 1
    return F.one_hot(indexes, max(max_index + 1, max_length))[..., :max_length]


class CapacityDispatch(nn.Module):
    """Positions past an expert's capacity are dropped (an all-zero row)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, positions):
        dispatch = safe_one_hot(positions, 4).float()
        return self.proj(dispatch)


def test_max_of_a_tensor_and_an_int_in_a_helper_sizes_one_hot(tmp_path):
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1)
    inputs = [torch.tensor([[0, 1, 2]])] + [
        torch.randint(0, 3 + i % 5, (2, 3), generator=generator) for i in range(15)]
    # the example's max index is 2: max(4, 4) keeps the tensor item; larger indexes take the other outcome
    assert _check(CapacityDispatch(), inputs, lambda p: bool(max(p.max() + 2, 4) > 4), tmp_path) == 2


class ClipByNorm(nn.Module):
    """Scale down activations whose norm passes a limit (a Python float or a tensor per call)."""

    def __init__(self, max_norm: float = 4.0) -> None:
        super().__init__()
        self.max_norm = max_norm
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc(x)
        factor = min(1.0, self.max_norm / (h.norm() + 1e-6))
        floor = max(h.mean(), h[:, 0].mean(), -0.1)  # three items: the first of the largest wins
        return h * factor - floor


def test_min_and_max_of_python_numbers_and_tensors(tmp_path):
    torch.manual_seed(3)
    generator = torch.Generator().manual_seed(4)
    inputs = [torch.randn(2, 8, generator=generator) * s + (i % 3 - 1) for i, s in
              enumerate([0.1, 0.5, 3.0, 8.0] * 5)]
    model = ClipByNorm().eval()

    def choice(x):
        h = model.fc(x)
        items = [float(h.mean()), float(h[:, 0].mean()), -0.1]
        return bool(model.max_norm / (h.norm() + 1e-6) < 1.0), items.index(max(items))

    assert _check(model, inputs, choice, tmp_path) >= 3


def test_max_over_one_sequence_of_unknown_length_is_refused_at_its_line():
    class Loudest(nn.Module):
        def forward(self, x):
            return x * max(x.sum(1).unbind(0))  # MARK

    with pytest.raises(dycl.UnsupportedError) as refused:
        dycl.compile(Loudest().eval(), torch.randn(3, 4))
    lines, first = inspect.getsourcelines(Loudest)
    assert refused.value.location.line == first + next(i for i, t in enumerate(lines) if "# MARK" in t)
