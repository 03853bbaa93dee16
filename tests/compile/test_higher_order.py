"""torch.cond, map, nested functions and lambdas, written the way torch.export users
write them, compile to one sub-DNN per branch and agree with eager on inputs that take
every branch, in-process and as a torch-free host (issue 15, item 7)."""

from __future__ import annotations

import pytest
import torch
from functorch.experimental.control_flow import map as control_flow_map
from torch import nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch


def scaled(*shape: int, count: int, seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator) * (0.2 + i % 5) * (-1) ** i for i in range(count)]


def check(model: nn.Module, example, inputs, tmp_path, branch_of=None, **options) -> int:
    """Compare with eager in-process and as a torch-free host; the number of distinct
    branches the inputs take (eager ``torch.cond`` runs its branches through dynamo, out of
    sight of the line tracer behind ``assert_equivalent``'s path count, so ``branch_of``
    computes each input's branch from the model's own predicates)."""
    compiled = dycl.compile(model, example, **options)
    paths = assert_equivalent(model, compiled, inputs, min_paths=1, atol=1e-5)
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, inputs, 1e-5)
    assert report["checked"] == len(inputs) and not report["problems"], report
    if branch_of is None:
        return paths
    with torch.no_grad():
        return len({branch_of(*(x if isinstance(x, tuple) else (x,))) for x in inputs})


class GatedResidual(nn.Module):
    """Branches as nested defs; the deep branch reads ``x`` and ``self`` from the enclosing forward."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.gate = nn.Linear(8, 1)

    def forward(self, x):
        h = self.proj(x)

        def deep(h):
            return torch.relu(self.proj(h)) + x

        def shallow(h):
            return h * 0.5

        return torch.cond(self.gate(h).mean() > 0, deep, shallow, (h,))


def test_cond_on_a_tensor_predicate_with_nested_def_branches(tmp_path):
    torch.manual_seed(0)
    model = GatedResidual().eval()
    inputs = scaled(2, 8, count=12, seed=1)
    branch = lambda x: bool(model.gate(model.proj(x)).mean() > 0)  # noqa: E731
    assert check(model, inputs[0], inputs, tmp_path, branch) == 2


class ShapeSwitch(nn.Module):
    """Lambda branches on a predicate over a symbolic batch dim."""

    def forward(self, x):
        return torch.cond(x.shape[0] > 2, lambda t: t.cos() * t.shape[0], lambda t: t.sin(), [x])


def test_cond_on_a_symbolic_size_with_lambda_branches(tmp_path):
    generator = torch.Generator().manual_seed(2)
    inputs = [torch.randn(b, 3, generator=generator) for b in (1, 2, 3, 4, 5, 2, 6)]
    assert check(ShapeSwitch().eval(), inputs[2], inputs, tmp_path, lambda x: x.shape[0] > 2) == 2


class TwoLevel(nn.Module):
    """A cond inside a branch; a method and a lambda as branches."""

    def small(self, x):
        return x * 2

    def forward(self, x):
        def big(x):
            return torch.cond(x.max() > 2, lambda t: t - 1, self.small, [x])

        return torch.cond(x.mean() > 0, big, self.small, [x])


def test_nested_cond_with_method_branches_takes_three_paths(tmp_path):
    inputs = scaled(4, count=15, seed=3)
    branch = lambda x: (bool(x.mean() > 0), bool(x.mean() > 0 and x.max() > 2))  # noqa: E731
    assert check(TwoLevel().eval(), inputs[0], inputs, tmp_path, branch) == 3


class Stepper(nn.Module):
    """A nested helper with an early return, called twice, counting its calls with ``nonlocal``."""

    def forward(self, x):
        steps = 0

        def step(h):
            nonlocal steps
            steps += 1
            if h.norm() > 4:
                return h / 2
            return h * 2

        h = step(x)
        h = step(h)
        return h, steps


def test_nested_function_with_nonlocal_counter_and_early_return(tmp_path):
    inputs = scaled(5, count=15, seed=4)
    assert check(Stepper().eval(), inputs[0], inputs, tmp_path) >= 3


class RowMap(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, xs, bias):
        def body(row, bias):
            return torch.tanh(self.fc(row)) + bias

        out = control_flow_map(body, xs, bias)
        if out.sum() > 0:
            return out
        return -out


def test_map_over_a_static_leading_dim(tmp_path):
    torch.manual_seed(5)
    model = RowMap().eval()
    generator = torch.Generator().manual_seed(6)
    inputs = [(torch.randn(3, 4, generator=generator), torch.randn(4, generator=generator) * 2) for _ in range(10)]
    assert check(model, inputs[0], inputs, tmp_path, dynamic=False) == 2


def test_map_over_a_symbolic_leading_dim_is_pinned_to_the_traced_sizes(tmp_path):
    """The map runs once per row: with the default symbolic batch its graph is compiled for
    the example's 3 rows (and for 1), with a SpecialisationWarning at the map's line (issue 27:
    specialise, not refuse); other row counts are refused by name, never answered wrongly."""
    torch.manual_seed(5)
    model = RowMap().eval()
    generator = torch.Generator().manual_seed(6)
    inputs = [(torch.randn(rows, 4, generator=generator), torch.randn(4, generator=generator) * 2)
              for rows in (3, 1) for _ in range(5)]
    with pytest.warns(dycl.SpecialisationWarning, match=r"test_higher_order\.py:\d+.*batch == 3"):
        assert check(model, inputs[0], inputs, tmp_path) == 2
    compiled = dycl.compile(model, inputs[0])
    with pytest.raises(ValueError, match=r"\(batch == 3\).*got batch = 5"):
        compiled(torch.randn(5, 4), torch.randn(4))
