"""The self-check's branch search (``dycl.harness.self_check_search``): a branch that none of the
example's derived inputs reaches is compared too, whatever construct it comes from."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn as nn
from dycl.hcfg.levers import Levers

import dycl
from dycl.harness import self_check
from dycl.harness.coverage import HostCoverage
from dycl.harness.self_check_inputs import derived_inputs
from dycl.harness.testing import assert_equivalent


class FarBranch(nn.Module):
    """Its first branch needs values far beyond the example's (a range check, an overflow guard)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        if x.abs().max() > 20:
            return self.fc(x) * 0.5
        return torch.tanh(x) + 1


def _example() -> torch.Tensor:
    return torch.randn(2, 4, generator=torch.Generator().manual_seed(0))


def _true_branch_sub_dnns(compiled, coverage: HostCoverage) -> set[int]:
    far, near = torch.full((2, 4), 50.0), torch.zeros(2, 4)
    return set(coverage.record(compiled, far)[1].ran - coverage.record(compiled, near)[1].ran)


def _faulty(compiled) -> None:
    """Break the compiled model on the far branch only: the sub-DNNs only it runs add 1."""
    coverage = HostCoverage(compiled._host, compiled._result.program)
    for index in _true_branch_sub_dnns(compiled, coverage):
        run = compiled._host._call[index]
        compiled._host._call[index] = lambda *args, run=run: tuple(value + 1 for value in run(*args))


def test_the_derived_inputs_alone_never_reach_the_far_branch():
    torch.manual_seed(0)
    model = FarBranch().eval()
    compiled = dycl.compile(model, _example(), check=False)
    coverage = HostCoverage(compiled._host, compiled._result.program)
    reached = set()
    for derived in derived_inputs((_example(),), {}, {}):
        reached |= set(coverage.record(compiled, *derived.args)[1].outcomes)
    assert reached == {(0, False)}


def test_a_wrong_answer_on_a_branch_only_the_search_reaches_is_caught():
    torch.manual_seed(0)
    model = FarBranch().eval()
    # the fault goes into the sub-DNN only the far branch runs: the host form has one
    compiled = dycl.compile(model, _example(), check=False, optimize=Levers(single_graph="off"))
    _faulty(compiled)
    subject = self_check.subject(model, compiled, compiled._result, (_example(),), None)
    assert self_check.run(dataclasses.replace(subject, search=None)) >= 5  # the gap: the fixed inputs pass
    with pytest.raises(dycl.SelfCheckError, match=r"times its spread: output: values differ"):
        self_check.run(subject)


def test_a_right_model_compiles_and_the_search_compares_the_far_branch():
    """The compile's self-check compares one input more than the fixed ones (the one reaching the far
    branch); the compiled model then agrees with eager on both branches."""
    torch.manual_seed(0)
    model = FarBranch().eval()
    compiled = dycl.compile(model, _example())
    example = _example()  # its batch dim is symbolic: one derived input is one row longer
    fixed = sum(1 for _ in derived_inputs((example,), {}, {id(example): (0,)}))
    assert compiled.stats["self_check"]["inputs"] == fixed + 1
    inputs = [_example() * scale for scale in (1.0, 0.5, 30.0, 60.0)]
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5) == 2
