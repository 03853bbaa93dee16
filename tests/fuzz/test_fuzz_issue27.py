"""The grammar of issue 27 (``dycl.fuzz.patterns27``): every construct the issue lists is
generated, runs eagerly, and is either compiled and compared or refused — never a crash or a
silent difference."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from dycl.fuzz.campaign import run_campaign
from dycl.fuzz.features import ISSUE_27, KNOWN_BUGS, program_features
from dycl.fuzz.generator import generate
from dycl.fuzz.patterns27 import Patterns27
from dycl.fuzz.program import render_module
from dycl.fuzz.runner import check_program

from .fakes import identity
from .find import program_with

PROGRAMS = [generate(5, i) for i in range(200)]


def test_without_them_the_programs_are_those_of_before():
    """A fourth random stream: a program that draws none of issue 27's constructs, or is generated
    with them excluded, is the program the generator gave before they existed."""
    same = 0
    for index, program in enumerate(PROGRAMS[:60]):
        # drawn once per block of 100 redraws: a program whose first block drew some and failed is
        # redrawn from the second, with every stream drawn anew (the fresh patterns' too)
        if not any(any(Patterns27(random.Random(f"dycl.fuzz.issue27:5:{index}:0:{block}"), frozenset()).on.values())
                   for block in range(2)):
            assert render_module(program) == render_module(generate(5, index, exclude=frozenset(ISSUE_27)))
            same += 1
    assert 10 <= same < 60
    assert set(ISSUE_27) <= set(KNOWN_BUGS)


def test_every_construct_of_issue_27_is_generated():
    used = Counter(feature for program in PROGRAMS for feature in program_features(program))
    shares = {name: used[name] / len(PROGRAMS) for name in ISSUE_27}
    assert set(ISSUE_27) >= {"try-except", "walrus", "chained-comparison", "tensor-conditional", "counter-loop",
                             "match", "enum", "max-key", "super-call", "generator", "recursion"}
    assert all(0.03 <= share <= 0.4 for share in shares.values()), shares


def test_the_constructs_run_eagerly(tmp_path: Path):
    """With a perfect "compiler" (the model itself): no program with the constructs is discarded
    for failing eagerly, and each takes several paths somewhere."""
    summary = run_campaign(30, 5, ["torch"], tmp_path / "out", None, compile_fn=identity, echo=lambda line: None)
    assert summary.programs == 30 and summary.discarded == 0 and not summary.failed
    assert sum(summary.features[name] for name in ISSUE_27) >= 10, summary.features


@pytest.mark.parametrize("construct", ["try-except", "match", "recursion", "counter-loop", "max-key", "super-call"])
def test_a_program_with_the_construct_compiles_or_is_refused(tmp_path: Path, construct: str):
    program = program_with([construct], without=["train-mode", "library", "sampling"])
    checked = check_program(program, tmp_path, ["torch"], timeout=120)
    assert checked.status in ("ok", "unsupported"), [(o.status, o.detail) for o in checked.outcomes]
