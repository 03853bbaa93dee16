"""The grammar of issue 26 (``dycl.fuzz.patterns26``) and what the runner compares for it:
the caller's tensors after each call, the example after compiling, and only crashes and
refusals (not values) for programs that sample."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import torch

import dycl
from dycl.fuzz.features import ISSUE_26, KNOWN_BUGS, PYTHON, program_features
from dycl.fuzz.generator import generate
from dycl.fuzz.loader import build_model, forget, import_file, make_inputs, write_program
from dycl.fuzz.program import render_module
from dycl.fuzz.regression import check_regression, write_regression
from dycl.fuzz.runner import Outcome, check_program, run_eager

from .fakes import identity
from .find import program_with

PROGRAMS = [generate(3, i) for i in range(200)]


def test_without_them_the_programs_are_those_of_before():
    """Issue 26's patterns have their own random stream: a program that draws none of them, or is
    generated with them excluded, is the program the generator gave before they existed."""
    same = 0
    for index, program in enumerate(PROGRAMS[:80]):
        if not program_features(program) & set(ISSUE_26):
            assert render_module(program) == render_module(generate(3, index, exclude=frozenset(ISSUE_26)))
            same += 1
    assert 20 <= same < 80
    assert set(ISSUE_26) <= set(KNOWN_BUGS)


def test_each_issue_26_feature_is_used_by_a_reasonable_share_of_programs():
    used = Counter(feature for program in PROGRAMS for feature in program_features(program))
    shares = {name: used[name] / len(PROGRAMS) for name in ISSUE_26}
    assert all(0.05 <= share <= 0.5 for share in shares.values()), shares


def test_shape_test_programs_are_called_with_several_batch_sizes():
    program = program_with(["shape-test"])
    sizes = [x.shape[0] for x in make_inputs(program, 6)]
    assert len(set(sizes)) >= 2 and sizes[:len(program.batch_sizes)] == list(program.batch_sizes)


@pytest.mark.parametrize("feature", ISSUE_26)
def test_a_program_with_each_feature_loads_and_runs(feature: str, tmp_path: Path):
    program = program_with([feature], exclude=PYTHON)  # the programs these checks were written on
    module = import_file(write_program(program, tmp_path))
    try:
        model = build_model(module, program)
        after: list[torch.Tensor] = []
        inputs = make_inputs(program, 8)
        outputs, paths = run_eager(model, inputs, after)
        assert len(outputs) == 8 and paths >= 1
        changed = any(not torch.equal(a, x) for a, x in zip(after, inputs))
        assert changed == (feature == "input-mutation" or "input-mutation" in program_features(program))
    finally:
        forget(module)


def _does_not_change_inputs(model, example, backend="torch"):
    """Equals eager in its outputs, but runs on a copy of the argument (as a compiler that drops
    in-place writes to its inputs would)."""
    return lambda x: model(x.clone())


def _probes_on_the_example(model, example, backend="torch"):
    """Equals eager, but runs forward on the example while compiling."""
    with torch.no_grad():
        model(example)
    return model


def test_the_callers_tensor_is_compared(tmp_path: Path):
    program = program_with(["input-mutation"], without=["sampling", "self-container", "buffer-update"], exclude=PYTHON)
    assert check_program(program, tmp_path, ["torch"], identity).status == "ok"
    outcome = check_program(program, tmp_path, ["torch"], _does_not_change_inputs).outcomes[0]
    assert outcome.status == "inconsistent" and "the argument after the call" in outcome.detail
    probed = check_program(program, tmp_path, ["torch"], _probes_on_the_example).outcomes[0]
    assert probed.status == "inconsistent" and probed.phase == "compile" and "example input" in probed.detail


def test_sampling_programs_compare_crashes_not_values(tmp_path: Path):
    program = program_with(["sampling"], without=["train-mode"])
    assert check_program(program, tmp_path, ["torch"], identity).status == "ok"  # eager against eager


def test_a_regression_file_keeps_batches_and_input_changes(tmp_path: Path, monkeypatch):
    program = program_with(["input-mutation", "shape-test"], without=["library", "train-mode"], exclude=PYTHON)
    inputs = make_inputs(program, 4)
    outcome = Outcome("torch", "inconsistent", "example")
    path = write_regression(tmp_path, program, outcome, inputs)
    module = import_file(path)
    try:
        rows = module.INPUTS
        assert [len(row) if isinstance(row[0], list) else 1 for row in rows] == [x.shape[0] for x in inputs]
        monkeypatch.setattr(dycl, "compile", identity)
        check_regression(getattr(module, program.name), module.SEED, rows, "torch", 1e-5)
        monkeypatch.setattr(dycl, "compile", _does_not_change_inputs)
        with pytest.raises(AssertionError, match="the argument after the call"):
            check_regression(getattr(module, program.name), module.SEED, rows, "torch", 1e-5)
    finally:
        forget(module)


def _programs_with(feature: str, count: int, seed: int = 3) -> list:
    """The first ``count`` programs of ``seed`` that use ``feature`` and no pattern of issue 14
    or other pattern of issue 26 (those are compiled by other parts of dycl)."""
    others = {name for name in KNOWN_BUGS if name != feature}
    found = []
    for index in range(2000):
        program = generate(seed, index, exclude=frozenset(others))
        if feature in program_features(program):
            found.append(program)
            if len(found) == count:
                return found
    raise AssertionError(f"fewer than {count} programs with {feature}")  # pragma: no cover


def test_hook_programs_agree_with_eager_or_are_refused_by_name(tmp_path: Path):
    outcomes = [check_program(p, tmp_path, ["onnxruntime"]).outcomes[0] for p in _programs_with("hooks", 6)]
    assert all(o.status in ("ok", "unsupported") for o in outcomes), [(o.status, o.detail) for o in outcomes]
    assert any(o.status == "ok" for o in outcomes)  # hooks on opaque submodules compile
    assert all("hook" in o.detail for o in outcomes if o.status == "unsupported"), outcomes


def test_sampling_programs_run_or_are_refused_at_the_sampling_line(tmp_path: Path):
    outcomes = [check_program(p, tmp_path, ["onnxruntime"]).outcomes[0] for p in _programs_with("sampling", 4)]
    assert all(o.status in ("ok", "unsupported") for o in outcomes), [(o.status, o.detail) for o in outcomes]
    refused = [o.detail for o in outcomes if o.status == "unsupported"]
    assert refused and all("random sampling" in detail for detail in refused), refused
