"""Write a (shrunk) failing program as a pytest regression test file.

The file is self-contained: a program's library functions are defined in it, so dycl then
sees them as user code, not as installed library code. A failure that needs them to be
library code (``"library"`` in ``dycl.fuzz.features``) does not reproduce from the file;
rerun the campaign's program (``python -m dycl.fuzz --seed S``) instead.
"""

from __future__ import annotations

import copy
import functools
import math
import textwrap
from collections.abc import Sequence
from pathlib import Path

import torch

import dycl
from dycl.fuzz.features import program_features
from dycl.fuzz.program import Program, render_classes
from dycl.fuzz.runner import ATOL, Outcome, check_backend, run_eager
from dycl.hcfg.levers import Levers


def _number(value: float) -> str:
    """Python source of ``value``: its repr (exact for a float32 widened to float), ``float("nan")``
    and ``float("inf")`` / ``float("-inf")`` for the values whose repr is no literal."""
    return repr(value) if math.isfinite(value) else f'float("{value}")'


def _rows(inputs: Sequence[torch.Tensor]) -> str:
    rows = []
    for x in inputs:
        # repr of a float32 value widened to float is exact, so torch.tensor() gets the same input back
        lines = [", ".join(_number(float(v)) for v in line.tolist()) for line in x.reshape(x.shape[0], -1)]
        text = f"[{lines[0]}]," if len(lines) == 1 else "[" + ", ".join(f"[{line}]" for line in lines) + "],"
        rows.append(textwrap.fill(text, 100, initial_indent="    ", subsequent_indent="     "))
    return "\n".join(rows)


def check_regression(model_class: type[torch.nn.Module], seed: int, rows: Sequence[Sequence[float]], backend: str,
                     atol: float, train: bool = False, samples: bool = False, levers: Levers | None = None,
                     special_from: int | None = None, min_paths: int = 1) -> None:
    """What a regression test asserts, as the fuzzer's oracle does: the model built under ``seed``
    (in eval mode unless ``train``) and compiled on ``backend`` for the first row either is refused
    (``UnsupportedError``) or, compiling it having left it unchanged, equals eager on every row, the
    rows given in order to each (state carried between calls), and so does every input as the call
    left it; each row is one input of batch 1, or a list of rows (a batch). ``samples``: the model
    draws random numbers, so only that every call runs is checked, not the values. ``levers``: compiled
    with them (``optimize=``), as the campaign that found the failure compiled. Rows from index
    ``special_from`` on hold special values (NaN, infinities, huge values: see :mod:`dycl.fuzz.special`).
    Eager must take at least ``min_paths`` distinct paths on the rows."""
    torch.manual_seed(seed)
    model = model_class()
    if not train:
        model.eval()
    inputs = [torch.tensor(row if isinstance(row[0], (list, tuple)) else [row]) for row in rows]
    after: list[torch.Tensor] = []
    expected, paths = run_eager(copy.deepcopy(model), inputs, after, special_from=special_from)
    assert paths >= min_paths, f"eager took {paths} paths on the rows, fewer than {min_paths}"
    # dycl.compile looked up now, so that a test can patch it
    compile_fn = dycl.compile if levers is None else functools.partial(dycl.compile, optimize=levers)
    outcome = check_backend(copy.deepcopy(model), inputs, expected, backend, compile_fn, atol=atol,
                            expected_inputs=after, compare_values=not samples, special_from=special_from)
    assert outcome.status in ("ok", "unsupported"), f"{outcome.status}: {outcome.detail}"


def regression_name(program: Program, backend: str) -> str:
    return f"test_fuzz_{program.name.removeprefix('Fuzz_').lower()}_{backend}"


def regression_source(program: Program, outcome: Outcome, inputs: Sequence[torch.Tensor],
                      original_lines: int | None = None, xfail: bool = False, levers: Levers | None = None,
                      special_from: int | None = None) -> str:
    """Source of a test module: the program's classes and a test that compiles the model for
    ``inputs[0]`` on ``outcome.backend`` and asserts equivalence with eager on every input
    (marked strict xfail if ``xfail``: a known bug, the mark goes once it is fixed)."""
    name = regression_name(program, outcome.backend)
    train = ", train=True" if program.train else ""
    train += ", samples=True" if "sampling" in program_features(program) else ""
    train += ", levers=LEVERS" if levers is not None else ""
    train += f", special_from={special_from}" if special_from is not None else ""
    shrunk = f" (shrunk from {original_lines} lines)" if original_lines else ""
    detail = textwrap.shorten(outcome.detail, 300, placeholder=" ...")
    header = ("# ruff: noqa  (generated code)\n"
              f'"""Found by `python -m dycl.fuzz`: program {program.name}{shrunk}, backend {outcome.backend}.\n\n'
              f"Failure: {outcome.status}: {detail}\n"
              '"""\n\n'
              + ("import pytest\n" if xfail else "")
              + "import functools\n\nimport torch\n"
              "from torch import nn\n\n"
              "from dycl.fuzz.regression import check_regression\n"
              + ("from dycl.hcfg.levers import Levers\n" if levers is not None else "") + "\n\n")
    body = (f"\n\nSEED = {program.seed}\n"
            f'BACKEND = "{outcome.backend}"\n'
            f"ATOL = {ATOL.get(outcome.backend, 1e-4)}\n"
            + (f"LEVERS = {levers!r}\n" if levers is not None else "")
            + "# inputs[0] is the example input the model is compiled for\n"
            f"INPUTS = [\n{_rows(inputs)}\n]\n\n\n"
            + (f"@pytest.mark.xfail(strict=True, reason={('dycl bug: ' + outcome.status)!r})\n" if xfail else "")
            + f"def {name}():\n"
            f"    check_regression({program.name}, SEED, INPUTS, BACKEND, ATOL{train})\n")
    return header + render_classes(program) + body


def write_regression(directory: Path, program: Program, outcome: Outcome, inputs: Sequence[torch.Tensor],
                     original_lines: int | None = None, xfail: bool = False, levers: Levers | None = None,
                     special_from: int | None = None) -> Path:
    """Write the regression test for ``program`` into ``directory``; returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{regression_name(program, outcome.backend)}.py"
    path.write_text(regression_source(program, outcome, inputs, original_lines, xfail, levers, special_from))
    return path
