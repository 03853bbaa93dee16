"""The generator: deterministic per seed, bounded, valid Python, covering the constructs it promises."""

from __future__ import annotations

import ast
import inspect
from collections import Counter
from pathlib import Path

import pytest

from dycl.fuzz.features import program_features
from dycl.fuzz.generator import FEATURES, KNOWN_BUGS, MAX_DEPTH, MAX_LINES, MAX_TRIPS, PATTERN_LINES, generate
from dycl.fuzz.loader import (
    build_model,
    forget,
    import_file,
    library_directory,
    library_module_name,
    make_inputs,
    write_program,
)
from dycl.fuzz.patterns import BUFFER_OPS, DICT_OPS, LIST_OPS, SET_OPS
from dycl.fuzz.program import For, If, Line, Program, While, count_lines, render_module
from dycl.fuzz.runner import run_eager

from .find import program_with

PROGRAMS = [generate(3, i) for i in range(200)]


def _depth(body) -> int:
    deepest = 0
    for stmt in body:
        if isinstance(stmt, If):
            inner = [*stmt.bodies, stmt.orelse or []]
            deepest = max(deepest, 1 + max(_depth(b) for b in inner))
        elif isinstance(stmt, (For, While)):
            deepest = max(deepest, 1 + _depth(stmt.body))
    return deepest


def _loops(body):
    for stmt in body:
        if isinstance(stmt, If):
            for b in [*stmt.bodies, stmt.orelse or []]:
                yield from _loops(b)
        elif isinstance(stmt, (For, While)):
            yield stmt
            yield from _loops(stmt.body)


def _bodies(program: Program):
    return ([program.body] + [h.body for h in program.helpers] + [f.body for f in program.library]
            + [b for b in (program.gate_body, program.gate_inner) if b is not None])


def test_same_seed_same_programs():
    for index in range(30):
        assert render_module(generate(7, index)) == render_module(generate(7, index))
        assert render_module(generate(7, index, attempt=2)) == render_module(generate(7, index, attempt=2))


def test_different_seeds_and_indices_differ():
    sources = {render_module(generate(seed, index)).split('"""', 2)[2] for seed in (0, 1) for index in range(20)}
    assert len(sources) == 40


def test_programs_are_bounded():
    for program in PROGRAMS:
        assert count_lines(program) <= MAX_LINES + PATTERN_LINES
        assert len(program.layer_kinds) <= MAX_TRIPS and 4 <= program.width <= 8
        for body in _bodies(program):
            assert _depth(body) <= MAX_DEPTH
            for loop in _loops(body):
                trips = loop.bound if isinstance(loop, While) else loop.trips
                assert trips <= MAX_TRIPS


def test_programs_are_valid_python_with_the_model_class():
    for program in PROGRAMS:
        tree = ast.parse(render_module(program))
        classes = [node.name for node in tree.body if isinstance(node, ast.ClassDef)]
        assert classes[-1] == program.name


def test_constructs_are_all_generated():
    sources = [render_module(p) for p in PROGRAMS]
    wanted = {
        "for over range": "in range(", "for over the layers": "in self.layers:", "enumerate": "in enumerate(",
        "while": "while step", "elif": "elif ", "else": "else:", "break": "break", "continue": "continue",
        "early return": "            return ", "append": "outs.append(", "counter": "n += 1",
        "helper": "self._helper0(x, ", "submodule": "class Gate", "gate loop": "in self.gates:",
        "tensor test": ".sum() >", "item test": ".mean().item() <", "max test": ".max() >",
        "flag test": "if self.flag:", "index test": " % 2 == ", "tuple return": "return x, ",
        "list read": "outs[0] * 0.1", "item arithmetic": "x - x.mean().item() * 0.5",
        "batch resize": "torch.cat([x, x * 0.5], 0)[:3]", "data-dependent counter": "n += int(x.sum() > 0)",
        "list return": "return x, outs", "float return": "x.sum().item()",
    }
    missing = [name for name, text in wanted.items() if not any(text in s for s in sources)]
    assert not missing


def test_exclude_drops_features():
    features = {"item-arith", "list-read", "batch-resize", "int-counter"}
    excluded = [render_module(generate(3, i, exclude=features)) for i in range(100)]
    assert not any("x - x.mean().item() * 0.5" in s for s in excluded)
    assert not any("n += int(" in s for s in excluded)
    assert not any("outs[0] * 0.1" in s or "(x + outs[-1][:1]) * 0.5" in s for s in excluded)
    assert not any("torch.cat([x, x * 0.5], 0)" in s or "x = x[:1]" in s for s in excluded)
    assert set(KNOWN_BUGS) <= set(FEATURES) and features <= set(FEATURES)
    with pytest.raises(ValueError, match="unknown"):
        generate(0, 0, exclude={"no-such-feature"})



NEW_FEATURES = ["dict-mutation", "list-mutation", "set-mutation", "alias", "item-write", "del", "self-container",
                "buffer-update", "nested-exit", "swapped-forward", "train-mode", "library", "kwargs-callee",
                "decorator", "tensor-data"]


def test_each_new_feature_is_used_by_a_reasonable_share_of_programs():
    used = Counter(feature for program in PROGRAMS for feature in program_features(program))
    shares = {name: used[name] / len(PROGRAMS) for name in NEW_FEATURES}
    assert set(NEW_FEATURES) <= set(FEATURES)
    assert all(0.05 <= share <= 0.5 for share in shares.values()), shares


@pytest.mark.parametrize(("text", "features"), [
    *[(op.format(T="vals", k="1"), {"list-mutation"} | set(tags)) for op, tags in LIST_OPS],
    *[(op.format(D="cfg", k="1"), {"dict-mutation"} | set(tags)) for op, tags in DICT_OPS],
    *[(op.format(k="1"), {"set-mutation"}) for op in SET_OPS],
    ("view = vals\nview.append(1)", {"alias", "list-mutation"}),
    ("opts = cfg\nopts[\"a\"] = 1", {"alias", "dict-mutation", "item-write"}),
    ("view = list(vals)\nx = x + view[1] * 0.05", set()),
    ("x = x + vals[0] * 0.1", set()),
    *[(op, {"buffer-update"}) for ops in BUFFER_OPS.values() for op in ops],
])
def test_features_are_recognised_in_statements(text: str, features: set[str]):
    program = generate(3, 0, exclude=NEW_FEATURES)
    program.body.append(Line(text))
    if "self." in text:
        program.buffers = {"count": "scalar", "running": "vector"}
    assert program_features(program) & set(NEW_FEATURES) == features


def test_exclude_drops_the_new_features():
    for index in range(100):
        assert not program_features(generate(3, index, exclude=NEW_FEATURES)) & set(NEW_FEATURES)


@pytest.mark.parametrize("feature", NEW_FEATURES)
def test_a_program_with_each_feature_loads_and_runs(feature: str, tmp_path: Path):
    program = program_with([feature])
    path = write_program(program, tmp_path)
    library = library_directory() / f"{library_module_name(path.stem)}.py"
    assert library.is_file() == (feature == "library" or bool(program.library))
    module = import_file(path)
    try:
        model = build_model(module, program)
        assert model.training == (feature == "train-mode" or program.train)
        outputs, paths = run_eager(model, make_inputs(program, 8))
        assert len(outputs) == 8 and paths >= 1
        if feature == "library":
            function = getattr(module, program.library[0].name)
            assert inspect.getsourcefile(function).startswith(str(library_directory()))
    finally:
        forget(module)
    assert not library.exists()
