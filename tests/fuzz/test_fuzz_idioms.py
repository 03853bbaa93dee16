"""The idioms of dynamic code (``dycl.fuzz.patterns_idioms``) in the grammar: a sixth random stream
that leaves the programs of before alone, each idiom generated, running eagerly on several paths,
and compiled on ONNX Runtime equal to eager (special values included) or refused by name."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from dycl.fuzz.features import IDIOMS, KNOWN_BUGS, PYTHON, program_features
from dycl.fuzz.generator import generate
from dycl.fuzz.patterns_idioms import IdiomPatterns
from dycl.fuzz.program import render_module
from dycl.fuzz.runner import check_program

from .find import draws_none, most_eager_paths

PROGRAMS = [generate(5, i) for i in range(200)]


def test_without_them_the_programs_are_those_of_before():
    same = 0
    for index, program in enumerate(PROGRAMS[:60]):
        if draws_none(IdiomPatterns, "idioms", index):
            assert render_module(program) == render_module(generate(5, index, exclude=frozenset(IDIOMS)))
            same += 1
    assert 10 <= same < 60
    assert set(IDIOMS) <= set(KNOWN_BUGS)


def test_every_idiom_is_generated():
    used = Counter(feature for program in PROGRAMS for feature in program_features(program))
    assert set(IDIOMS) == {"host-loop-bound", "tolist-builtins", "where-host", "dim-reduction", "topk-sort",
                           "inplace-update", "loop-list-stack", "int-tensor"}
    shares = {name: used[name] / len(PROGRAMS) for name in IDIOMS}
    assert all(0.03 <= share <= 0.4 for share in shares.values()), shares


def test_every_idiom_runs_eagerly_on_several_paths(tmp_path: Path):
    most = most_eager_paths(PROGRAMS, IDIOMS, tmp_path)
    assert all(paths >= 2 for paths in most.values()), most


def test_the_first_program_of_each_idiom_compiles_equal_to_eager_or_is_refused(tmp_path: Path):
    """On ONNX Runtime, on the random and the special-valued inputs: never wrong, never a crash;
    most compile (the refusals are of data-dependent loop bounds and of a list's emptiness tested
    after a data-dependent ``break``: see the report of the campaign)."""
    statuses: Counter = Counter()
    before = (generate(5, i, exclude=frozenset(PYTHON)) for i in range(200))  # the programs it was written on
    firsts = {}
    for program in before:
        for name in set(IDIOMS) & program_features(program) - set(firsts):
            firsts[name] = program
        if len(firsts) == len(IDIOMS):
            break
    for name in IDIOMS:
        program = firsts[name]
        checked = check_program(program, tmp_path, ["onnxruntime"], timeout=120)
        assert checked.status in ("ok", "unsupported"), (name, checked.outcomes[0].detail)
        assert checked.paths >= 2 and len(checked.inputs) > checked.special_from
        statuses[checked.status] += 1
    assert statuses["ok"] >= 4, statuses
