"""The fresh soundness hunt's corpus (tests/soundness/fresh_hunt_models.py): each model
compiles and equals eager on 60 inputs over several paths, in process and through the
torch-free host, or is refused with a dycl.UnsupportedError at a line of its own forward()."""

from __future__ import annotations

import copy
import inspect

import pytest
import torch

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch

from . import fresh_hunt_models as M

# model -> the number of distinct eager paths its 60 inputs take
COMPILED = {
    M.ClampInputInplace: 2, M.ColumnLoopWrite: 2, M.CatOfViewsThenWrite: 2, M.IndexAddBranch: 2,
    M.ScatterOneHot: 2, M.MaskedFillUnderBranch: 2, M.TransposeContiguousWrite: 2,
    M.GetattrLayerByData: 2, M.ModuleDictByString: 2, M.StoredLambda: 2, M.TreeNet: 3,
    M.GeneratorOverLayers: 2, M.SuperForward: 2, M.NamedTupleOutput: 2, M.DictOutput: 2,
    M.DataDefaultKwarg: 2, M.TorchCond: 2, M.TorchAssert: 2, M.SingleArgWhere: 2, M.EmptyThenFill: 2,
    M.IntDivision: 2, M.NegativeFloorDivInt: 2, M.HalfRoundTrip: 2, M.MaskedAssignBranch: 2,
    M.InferenceModeBlock: 2, M.BoolArithmetic: 2, M.LongOverflowSum: 2,
    M.ToOtherDtype: 2, M.FloatOfIntInput: 2, M.Int64Sum: 2, M.BufferWriteUnderBranch: 2,
    M.ScriptingCompilingChecks: 2, M.GradEnabledBranch: 2, M.DtypeBranch: 2,  # folded: rewriter.mode_predicates,
}  # hcfg.type_tests

# model -> a fragment of the refused construct's description
REFUSED = {
    M.SliceAddInplace: "in-place update", M.InputViewWrite: "in-place update",
    M.KwargsForward: "different structure", M.NoGradAndAutocast: "with statement",
    M.ManualSeedInForward: "random sampling",
    M.ClassAttributeCounter: "host operation", M.ModuleLevelCache: "outlives the call",
    M.make_closure_model: "outlives the call", M.RegisterBufferInForward: "module state",
}


def _forward_lines(model: torch.nn.Module) -> range:
    lines, first = inspect.getsourcelines(type(model).forward)
    return range(first, first + len(lines))


@pytest.mark.parametrize("factory", list(COMPILED), ids=lambda f: f.__name__)
def test_compiles_and_matches_eager_in_process_and_host(factory, tmp_path):
    torch.manual_seed(0)
    model = factory().eval()
    inputs = M.inputs_for(factory)
    reference, host_reference = copy.deepcopy(model), copy.deepcopy(model)  # module state: each its own
    compiled = dycl.compile(model, inputs[0])
    artifact = compiled.save(tmp_path / "net")
    assert assert_equivalent(reference, compiled, inputs, min_paths=2, atol=1e-5) == COMPILED[factory]
    report = run_host_without_torch(artifact, host_reference, inputs, 1e-5)
    assert report["checked"] == len(inputs) and not report["problems"], report


@pytest.mark.parametrize("factory", list(REFUSED), ids=lambda f: f.__name__)
def test_refused_at_a_line_of_its_forward(factory):
    torch.manual_seed(0)
    model = factory().eval()
    with pytest.raises(dycl.UnsupportedError) as error:
        dycl.compile(model, M.inputs_for(factory)[0])
    assert REFUSED[factory] in str(error.value)
    assert error.value.location.path.endswith("fresh_hunt_models.py")
    assert error.value.location.line in _forward_lines(model)


class FloorDivision(torch.nn.Module):
    """``//`` on integer and float tensors with negative values: eager floors."""

    def forward(self, x):
        if x.sum() > 4:
            return x // 3
        return (x.float() / 2) // 0.7


def test_floor_division_of_negative_values_floors_in_process_and_host(tmp_path):
    model = FloorDivision().eval()
    generator = torch.Generator().manual_seed(5)
    inputs = [torch.randint(-9, 9, (3, 4), generator=generator) for _ in range(60)]
    assert any((x // 3 * 3 != x).logical_and(x < 0).any() for x in inputs)  # some round down, not to zero
    compiled = dycl.compile(model, inputs[0])
    assert assert_equivalent(model, compiled, inputs, min_paths=2) == 2
    report = run_host_without_torch(compiled.save(tmp_path / "net"), model, inputs, 0.0)
    assert report["checked"] == len(inputs) and not report["problems"], report


class HashBuckets(torch.nn.Module):
    """An int64 hash of token ids (large products, sums past 2**53 that wrap as eager's do)."""

    def forward(self, ids):
        mixed = ids * 6364136223846793005 + 1442695040888963407
        total = mixed.sum(1)
        if total.sum() % 2 == 0:
            return total % 1000
        return mixed.sum() + total


def test_int64_sums_are_exact_and_wrap_in_process_and_host(tmp_path):
    model = HashBuckets().eval()
    generator = torch.Generator().manual_seed(6)
    inputs = [torch.randint(0, 50000, (3, 5), generator=generator) for _ in range(60)]
    compiled = dycl.compile(model, inputs[0])
    assert assert_equivalent(model, compiled, inputs, min_paths=2) == 2
    report = run_host_without_torch(compiled.save(tmp_path / "net"), model, inputs, 0.0)
    assert report["checked"] == len(inputs) and not report["problems"], report
