"""Special-valued inputs (``dycl.fuzz.special``): every program is also called on NaN, infinities,
zeros, -0.0, ties, equal rows, huge and tiny values; a compiled model that differs from eager only
there is caught, one that agrees (NaN equal to NaN) is not, and the regression file reproduces them."""

from __future__ import annotations

from pathlib import Path

import torch

from dycl.fuzz.features import program_features
from dycl.fuzz.generator import generate
from dycl.fuzz.program import Line
from dycl.fuzz.regression import check_regression, regression_source
from dycl.fuzz.runner import Outcome, check_program
from dycl.fuzz.special import KINDS, special_inputs

from .fakes import identity


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(a, b, atol=0.0, rtol=0.0, equal_nan=True)


def test_special_inputs_are_seeded_and_of_each_kind():
    programs = [generate(3, i) for i in range(40)]
    program = next(p for p in programs if "batch-resize" not in program_features(p))
    first, again = special_inputs(program), special_inputs(program)
    assert len(first) == len(KINDS) and all(_same(a, b) for a, b in zip(first, again))
    by_kind = dict(zip(KINDS, first))
    assert int(by_kind["nan"].isnan().sum()) == 1
    assert by_kind["inf"].isposinf().any() and by_kind["inf"].isneginf().any()
    assert (by_kind["zeros"] == 0).all() and not by_kind["zeros"].signbit().any()
    assert by_kind["negzero"].signbit().all() and (by_kind["negzero"] == 0).all()
    assert (by_kind["ties"] == by_kind["ties"][:, :1]).all()
    assert (by_kind["equal-rows"] == by_kind["equal-rows"][:1]).all()
    assert by_kind["huge"].abs().max() > 1e5 and 0 < by_kind["tiny"].abs().max() < 1e-25
    assert all(x.shape[1] == program.width for x in first)
    assert by_kind["other-batch"].shape[0] == max(program.batch_sizes) + 1
    resized = next(p for p in programs if "batch-resize" in program_features(p))  # its batch depends on the path
    assert len(special_inputs(resized)) == len(KINDS) - 1
    assert {x.shape[0] for x in special_inputs(resized)} <= set(resized.batch_sizes)
    other = next(p for p in programs if p.seed != program.seed and p.width == program.width)
    assert not _same(special_inputs(other)[0], first[0])  # another program, other draws


def _wrong_on_nan(model, example, backend="torch"):
    """Equals eager, except that a NaN in the input gives zeros (a translation that drops NaN)."""
    def run(x):
        out = model(x)
        if x.isnan().any():
            return (torch.nan_to_num(out[0], nan=0.0),) + out[1:] if isinstance(out, tuple) else torch.nan_to_num(
                out, nan=0.0)
        return out
    return run


def test_a_difference_only_on_special_values_is_caught_and_agreement_is_not(tmp_path: Path):
    caught, agreed, nan_outputs = 0, 0, 0
    for index in range(6):
        program = generate(11, index)
        honest = check_program(program, tmp_path, ["torch"], identity)
        assert honest.status == "ok", honest.outcomes[0].detail  # NaN == NaN: the same model agrees
        agreed += 1
        special = honest.inputs[honest.special_from:]
        nan_outputs += any(x.isnan().any() for x in special)
        wrong = check_program(program, tmp_path, ["torch"], _wrong_on_nan)
        if wrong.status == "inconsistent":
            assert all(i >= wrong.special_from for i in wrong.outcomes[0].failing)
            caught += 1
    assert agreed == 6 and nan_outputs >= 1 and caught >= 3


def test_a_special_input_eager_raises_on_is_dropped(tmp_path: Path):
    """``int()`` of a NaN or an infinity raises in eager: those inputs are left out, the others kept."""
    program = generate(11, 0)
    program.body.insert(0, Line("x = x + int(x.sum().item() > 0) * 0.1 + int(x.abs().max().item()) * 0.0"))
    checked = check_program(program, tmp_path, ["torch"], identity)
    kept = checked.inputs[checked.special_from:]
    assert checked.status == "ok" and len(kept) == len(KINDS) - 2
    assert all(bool(torch.isfinite(x).all()) for x in kept)


def test_the_regression_file_writes_special_values_and_reproduces_them(tmp_path: Path):
    program = generate(11, 1)
    checked = check_program(program, tmp_path, ["torch"], identity)
    start = checked.special_from
    inputs = [checked.inputs[0], *checked.inputs[start:start + 2]]  # the example, the NaN and the inf inputs
    outcome = Outcome("torch", "inconsistent", "a test of the writer", [1, 2])
    source = regression_source(program, outcome, inputs, special_from=1)
    assert 'float("nan")' in source and 'float("inf")' in source and 'float("-inf")' in source
    namespace: dict = {}
    exec(compile(source, str(tmp_path / "regression.py"), "exec"), namespace)  # noqa: S102 - our own output
    rows = namespace["INPUTS"]
    assert all(_same(torch.tensor(row if isinstance(row[0], list) else [row]), x) for row, x in zip(rows, inputs))
    assert "special_from=1" in source
    check_regression(namespace[program.name], program.seed, rows, "torch", 1e-5, special_from=1)
