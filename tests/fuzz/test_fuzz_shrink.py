"""The shrinker really shrinks: against deliberately broken compilers, failures shrink to a few lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from dycl.fuzz.campaign import shrink_failure
from dycl.fuzz.generator import generate
from dycl.fuzz.program import For, Program, While, count_lines, render_classes, walk_blocks
from dycl.fuzz.runner import check_program
from dycl.fuzz.shrink import candidates

from .fakes import crash_on_continue, wrong_on_while, wrong_when
from .find import program_with


def _big_program_with(text: str, seed: int = 5):
    for index in range(200):
        program = generate(seed, index)
        if text in render_classes(program) and count_lines(program) >= 35:
            return program
    raise AssertionError(f"no program with {text!r}")  # pragma: no cover


def test_shrinks_an_inconsistency_to_a_bare_while_loop(tmp_path: Path):
    program = _big_program_with("while ")
    checked = check_program(program, tmp_path, ["torch"], wrong_on_while)
    assert checked.status == "inconsistent"
    shrunk, outcome, _ = shrink_failure(checked, checked.outcomes[0], tmp_path, wrong_on_while)
    source = render_classes(shrunk)
    assert outcome.status == "inconsistent" and outcome.backend == "torch"
    assert "while " in source
    # class, __init__, super().__init__(), def forward, counter = 0, while, pass, increment, return
    assert count_lines(shrunk) <= 10 < 35 <= count_lines(program), source
    assert "class Gate" not in source and "_helper" not in source
    again = check_program(shrunk, tmp_path / "again", ["torch"], wrong_on_while)
    assert again.status == "inconsistent"


def test_shrinks_a_compile_error_keeping_its_type(tmp_path: Path):
    program = _big_program_with("continue")
    checked = check_program(program, tmp_path, ["onnxruntime"], crash_on_continue)
    assert checked.status == "error" and checked.outcomes[0].error_type == "RuntimeError"
    shrunk, outcome, _ = shrink_failure(checked, checked.outcomes[0], tmp_path, crash_on_continue)
    source = render_classes(shrunk)
    assert "continue" in source and outcome.signature() == checked.outcomes[0].signature()
    assert count_lines(shrunk) <= 12, source


def test_shrinker_leaves_no_candidate_files(tmp_path: Path):
    program = _big_program_with("while ")
    checked = check_program(program, tmp_path, ["torch"], wrong_on_while)
    shrink_failure(checked, checked.outcomes[0], tmp_path, wrong_on_while)
    assert list((tmp_path / "shrink").glob("*.py")) == []


def _size(program: Program) -> int:
    statements = sum(len(block) for block in walk_blocks(program))
    loops = [stmt for block in walk_blocks(program) for stmt in block if isinstance(stmt, (For, While))]
    module_trips = {"range": 0, "layers": len(program.layer_kinds) + 1, "enumerate": len(program.layer_kinds) + 1,
                    "gates": program.n_gates + 1}
    trips = sum(loop.bound if isinstance(loop, While) else loop.trips + module_trips[loop.kind] for loop in loops)
    attributes = len(program.layer_kinds) + program.n_fc + program.n_gates + len(program.returns)
    attributes += (program.flag is not None) + (program.limit is not None)
    patterns = (program.train + program.swap_forward + program.gate_swap + program.gate_kwargs
                + (program.gate_inner is not None) + len(program.library) + len(program.attributes)
                + len(program.buffers) + sum(h.kwargs + (h.decorator is not None) for h in program.helpers)
                + len(program.init_lines) + (program.batch_sizes != (1,)))
    return count_lines(program) + statements + trips + attributes + patterns


@pytest.mark.parametrize("index", range(10))
def test_every_candidate_is_smaller(index: int):
    program = generate(11, index)
    options = candidates(program)
    assert len(options) >= 5
    for candidate in options:
        assert _size(candidate) < _size(program)
        assert count_lines(candidate) <= count_lines(program)


def test_shrinks_away_the_patterns_a_failure_does_not_need(tmp_path: Path):
    program = program_with(["buffer-update", "decorator", "library", "train-mode"])
    fake = wrong_when('register_buffer("count"')
    checked = check_program(program, tmp_path, ["torch"], fake)
    assert checked.status == "inconsistent"
    shrunk, outcome, _ = shrink_failure(checked, checked.outcomes[0], tmp_path, fake)
    source = render_classes(shrunk)
    assert outcome.status == "inconsistent" and 'register_buffer("count"' in source
    assert not shrunk.library and not shrunk.train and "@" not in source and "_helper" not in source, source
    # class, __init__, super().__init__(), register_buffer, def forward, pass, return
    assert count_lines(shrunk) <= 7 < 30 <= count_lines(program), source
