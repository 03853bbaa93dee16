"""A ``for`` loop whose bound is a literal chosen by data (``rewriter.chosen_bounds``): one loop
per literal under a test, each unrolled. Before, refused ("a for loop over a value that is not
known at compile time"): the fuzzer's most common refusal with a construct to compile (issue 27's
``host-int-conditional``)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch
from tests.rewriter.golden import after, golden

ATOL = 1e-5


class AdaptiveRefiner(nn.Module):
    """Refines harder inputs with more steps, as adaptive-computation models do."""

    def __init__(self, width: int = 8):
        super().__init__()
        self.encode, self.step, self.head = nn.Linear(width, width), nn.Linear(width, width), nn.Linear(width, 3)
        self.easy_steps = 1

    def forward(self, x):
        h = torch.relu(self.encode(x))
        uncertainty = h.std()
        steps = self.easy_steps if uncertainty < 0.5 else (2 if uncertainty < 1.5 else 4)
        for i in range(1, steps + 1):
            h = h + torch.tanh(self.step(h)) / i
        return self.head(h), steps


def _inputs(count: int = 18) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(7)
    return [torch.randn(1 + i % 2, 8, generator=generator) * (0.2, 1.5, 6.0)[i % 3] for i in range(count)]


def test_golden_a_loop_per_bound_the_data_may_choose():
    torch.manual_seed(0)
    assert after(AdaptiveRefiner().eval(), "unroll") == golden("""
        h = torch.relu(self.encode(x))
        uncertainty = h.std()
        steps = self.easy_steps if uncertainty < 0.5 else (2 if uncertainty < 1.5 else 4)
        if steps == 1:
            i = 1
            h = h + torch.tanh(self.step(h)) / i
        else:
            if steps == 2:
                i = 1
                h = h + torch.tanh(self.step(h)) / i
                i = 2
                h = h + torch.tanh(self.step(h)) / i
            else:
                if steps == 4:
                    i = 1
                    h = h + torch.tanh(self.step(h)) / i
                    i = 2
                    h = h + torch.tanh(self.step(h)) / i
                    i = 3
                    h = h + torch.tanh(self.step(h)) / i
                    i = 4
                    h = h + torch.tanh(self.step(h)) / i
                else:
                    raise RuntimeError("dycl: a loop bound chosen by data took a value the loop was not compiled for")
        return self.head(h), steps
    """)


def test_a_loop_bound_chosen_by_data_compiles_and_agrees(tmp_path):
    torch.manual_seed(0)
    model = AdaptiveRefiner().eval()
    inputs = _inputs()
    compiled = dycl.compile(model, inputs[0])
    with torch.no_grad():
        assert {model(x)[1] for x in inputs} == {1, 2, 4}  # every bound taken
    assert assert_equivalent(model, compiled, inputs, atol=ATOL) >= 3
    report = run_host_without_torch(compiled.save(tmp_path / "refiner"), model, inputs, ATOL)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


class ReboundBound(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        k = 2 if x.mean() > 0 else 3
        k = k + int(x.sum() > 1)  # no longer one of two literals
        for _ in range(k):
            x = torch.tanh(self.fc(x))
        return x


class ReboundLeaf(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        n = 2
        k = n if x.mean() > 0 else 3
        n = int(x.sum() > 0) + 5  # what `k` holds is not what `n` reads now
        for _ in range(k):
            x = torch.tanh(self.fc(x)) * n
        return x


@pytest.mark.parametrize("build", [ReboundBound, ReboundLeaf], ids=["bound-rebound", "leaf-rebound"])
def test_a_bound_that_is_not_one_of_the_chosen_literals_unrolls_to_its_cap(build, tmp_path):
    """Not one loop per literal (``per_literal`` declines), but capped (``rewriter.trip_bounds``: 2 or 3
    plus a bool; 2 or 3 as ``n`` was when ``k`` read it): unrolled to the cap, an iteration per count."""
    torch.manual_seed(0)
    model = build().eval()
    inputs = [torch.randn(1, 4, generator=torch.Generator().manual_seed(i)) * (0.1, 1.0, 3.0)[i % 3] + (i % 5 - 2)
              for i in range(24)]
    compiled = dycl.compile(model, inputs[0])
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=ATOL) >= 2  # counts 2 and 3
    report = run_host_without_torch(compiled.save(tmp_path / build.__name__), model, inputs, ATOL)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


class ScaledByConfig(nn.Module):
    """A factor chosen by data among a configured value and literals, then read again."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.base_scale = 1

    def forward(self, x):
        h = self.fc(x)
        spread = h.std()
        scale = self.base_scale if spread < 0.5 else (2 if spread < 1.5 else 4)
        return h * scale, scale


def test_a_choice_whose_result_is_a_configured_value_keeps_it_in_its_domain(tmp_path):
    """``self.base_scale`` (static 1) is one of the values ``scale`` may hold: the statements that
    read ``scale`` are compiled for it too. Before, the lifted branch bound the attribute, the
    domain dropped 1, and the compiled model raised on that path."""
    torch.manual_seed(0)
    model = ScaledByConfig().eval()
    inputs = _inputs()
    with torch.no_grad():  # three paths of the host program (one line in Python: the tracer sees one)
        assert {model(x)[1] for x in inputs} == {1, 2, 4}
    compiled = dycl.compile(model, inputs[0])
    assert_equivalent(model, compiled, inputs, min_paths=1, atol=ATOL)
    report = run_host_without_torch(compiled.save(tmp_path / "scaled"), model, inputs, ATOL)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


class BoundInTheOtherBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        k = int(x.abs().sum() > 1) + 4
        y = x
        if x.mean() > 0:
            k = 2 if x.sum() > 1 else 3
            y = y * k
        else:
            for _ in range(k):  # the k of the first line: 4 or 5, not 2 or 3
                y = torch.tanh(self.fc(y))
        return y


def test_a_bound_chosen_in_another_branch_is_not_taken_for_the_loops():
    with pytest.raises(dycl.UnsupportedError, match=r"a for loop over range\(n\) whose n comes from the input"):
        dycl.compile(BoundInTheOtherBranch().eval(), torch.randn(1, 4))
