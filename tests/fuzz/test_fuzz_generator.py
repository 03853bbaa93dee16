"""The generator: deterministic per seed, bounded, valid Python, covering the constructs it promises."""

from __future__ import annotations

import ast

import pytest

from dycl.fuzz.generator import FEATURES, KNOWN_BUGS, MAX_DEPTH, MAX_LINES, MAX_TRIPS, generate
from dycl.fuzz.program import For, If, Program, While, count_lines, render_module

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
    return [program.body] + [h.body for h in program.helpers] + ([program.gate_body] if program.gate_body else [])


def test_same_seed_same_programs():
    for index in range(30):
        assert render_module(generate(7, index)) == render_module(generate(7, index))
        assert render_module(generate(7, index, attempt=2)) == render_module(generate(7, index, attempt=2))


def test_different_seeds_and_indices_differ():
    sources = {render_module(generate(seed, index)).split('"""', 2)[2] for seed in (0, 1) for index in range(20)}
    assert len(sources) == 40


def test_programs_are_bounded():
    for program in PROGRAMS:
        assert count_lines(program) <= MAX_LINES
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
    assert not any(".item() * 0.5" in s for s in excluded)
    assert not any("n += int(" in s for s in excluded)
    assert not any("outs[0] * 0.1" in s or "(x + outs[-1][:1]) * 0.5" in s for s in excluded)
    assert not any("torch.cat(" in s or "x = x[:1]" in s for s in excluded)
    assert set(KNOWN_BUGS) <= set(FEATURES) and features <= set(FEATURES)
    with pytest.raises(ValueError, match="unknown"):
        generate(0, 0, exclude={"no-such-feature"})

