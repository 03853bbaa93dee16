"""The Python around tensors (``dycl.fuzz.patterns_python``) in the grammar: a seventh random stream
that leaves the programs of before alone, each construct generated, every statement running eagerly
(shape and dtype of ``x`` kept) and on several paths in programs, and compiled on ONNX Runtime equal
to eager (special values included) or refused by name."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import torch
from torch import nn

from dycl.fuzz.features import KNOWN_BUGS, PYTHON, program_features
from dycl.fuzz.generator import generate
from dycl.fuzz.patterns_python import FIRST, INIT, STATEMENTS, PythonPatterns
from dycl.fuzz.program import render_module
from dycl.fuzz.runner import check_program

from .find import draws_none, most_eager_paths

PROGRAMS = [generate(5, i) for i in range(200)]
#: programs of the base grammar with these constructs only (the other streams' patterns left out)
ALONE = [generate(5, i, exclude=frozenset(set(KNOWN_BUGS) - set(PYTHON))) for i in range(120)]


def test_without_them_the_programs_are_those_of_before():
    same = 0
    for index, program in enumerate(PROGRAMS[:60]):
        if draws_none(PythonPatterns, "python", index):
            assert render_module(program) == render_module(generate(5, index, exclude=frozenset(PYTHON)))
            same += 1
    assert 10 <= same < 60
    assert set(PYTHON) <= set(KNOWN_BUGS)


def test_every_construct_is_generated_and_recognised_as_itself_only():
    used = Counter(feature for program in PROGRAMS for feature in program_features(program))
    assert set(PYTHON) == {"row-loop", "capped-trip", "path-typed-number", "dtype-test", "indexed-submodule",
                           "tensor-split", "data-inplace", "host-int-list"}
    shares = {name: used[name] / len(PROGRAMS) for name in PYTHON}
    assert all(0.03 <= share <= 0.4 for share in shares.values()), shares
    others = {"tensor-data", "max-key", "int-tensor", "tolist-builtins", "host-loop-bound", "argmax-block",
              "module-choice", "inplace-update", "dim-reduction", "topk-sort", "where-host"}
    assert not any(program_features(program) & others for program in ALONE)
    assert all(any(name in program_features(program) for program in ALONE) for name in PYTHON)


class _Holder(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        for lines in INIT.values():
            for line in lines:
                exec(line.format(w=width), {"self": self, "nn": nn, "torch": torch})


def test_every_statement_runs_eagerly_and_keeps_x_shaped_and_float():
    generator = torch.Generator().manual_seed(0)
    runs = 0
    for texts in STATEMENTS.values():
        for text in texts:
            for width, batch in ((4, 1), (4, 3), (8, 2)):
                holder = _Holder(width)
                for scale in (1.0, 2.0, 3.0):
                    x = torch.randn(batch, width, generator=generator) * scale
                    names = {"x": x, "self": holder, "torch": torch}
                    exec(f"{FIRST}\n{text}", names)
                    assert names["x"].shape == (batch, width) and names["x"].dtype == torch.float32, text
                    runs += 1
    assert runs == 9 * sum(len(texts) for texts in STATEMENTS.values())


def test_every_construct_runs_eagerly_on_several_paths(tmp_path: Path):
    most = most_eager_paths(PROGRAMS, PYTHON, tmp_path)
    assert all(paths >= 2 for paths in most.values()), most


def test_the_first_program_of_each_construct_compiles_equal_to_eager_or_is_refused(tmp_path: Path):
    """On ONNX Runtime, on the random and the special-valued inputs: never wrong, never a crash (programs
    without the other streams' patterns, so that a construct's program is not refused for another's)."""
    statuses: Counter = Counter()
    for name in PYTHON:
        program = next(p for p in ALONE if name in program_features(p))
        checked = check_program(program, tmp_path, ["onnxruntime"], timeout=120)
        assert checked.status in ("ok", "unsupported"), (name, checked.outcomes[0].detail)
        assert checked.paths >= 2 and len(checked.inputs) > checked.special_from
        statuses[checked.status] += 1
    assert statuses["ok"] >= 4, statuses
