"""Random small HCFGs (seeded, Python ints for speed): ``annotate``,
``merge_into_producers`` and ``merge_across_renames`` leave a graph that passes ``check()`` and returns what the
raw graph returns on every input, across many distinct paths."""

from __future__ import annotations

import random

import pytest
from dycl.hcfg.annotate import annotate
from dycl.hcfg.graph import HCFG, Node, always_returns, walk
from dycl.hcfg.merge_renames import merge_across_renames
from dycl.hcfg.optimize import merge_into_producers
from dycl.hcfg.passes import checks_enabled

from tests.hcfg.graphs import cond, graph, host, ret, run, sub

NAMES = ("a", "b", "c", "d")


class _Program:
    def __init__(self, seed: int, renames: float = 0.0) -> None:
        self.rng = random.Random(seed)
        self.renames = renames  # how often a sub-DNN is followed by a host rename of a name it assigned
        self.subs = 0
        self.conds = 0

    def block(self, defined: set[str], depth: int) -> tuple[list[Node], set[str] | None]:
        """Nodes that read only ``defined``; returns them and what is defined after (None: every path returned)."""
        nodes: list[Node] = []
        for _ in range(self.rng.randint(1, 4)):
            roll = self.rng.random()
            if roll < 0.45:
                statements = []
                for _ in range(self.rng.randint(1, 3)):
                    target = self.rng.choice(NAMES)
                    left, right = self.rng.choice(sorted(defined)), self.rng.choice(sorted(defined))
                    statements.append(f"{target} = {left} + {right} * {self.rng.randint(1, 3)}")
                    defined = defined | {target}
                nodes.append(sub(self.subs, *statements))
                self.subs += 1
                if self.renames and self.rng.random() < self.renames:
                    written = sorted({s.split(" = ")[0] for s in statements})
                    target = self.rng.choice(NAMES)
                    nodes.append(host(f"{target} = {self.rng.choice(written)}"))
                    defined = defined | {target}
            elif roll < 0.6:
                text = self.rng.choice(["n = n - 1", f"k = {self.rng.choice(sorted(defined))} * 2"])
                nodes.append(host(text))
                defined = defined | {text[0]}
            elif roll < 0.85 and depth < 2:
                index = self.conds
                self.conds += 1
                then, then_defined = self.block(set(defined), depth + 1)
                orelse, else_defined = self.block(set(defined), depth + 1) if self.rng.random() < 0.7 else ([], defined)
                nodes.append(cond(index, f"n > {self.rng.randint(-1, 3)}", then=tuple(then), orelse=tuple(orelse)))
                outs = [d for d in (then_defined, else_defined) if d is not None]
                if not outs:
                    return nodes, None
                defined = set.intersection(*outs)
            else:
                nodes.append(ret(self.rng.choice(sorted(defined))))
                return nodes, None
        return nodes, defined


def random_graph(seed: int, renames: float = 0.0) -> HCFG:
    program = _Program(seed, renames)
    body, defined = program.block({"x", "n"}, 0)
    if defined is not None:
        body.append(ret(f"({', '.join(sorted(defined))})"))
    assert always_returns(tuple(body))
    return graph(("x", "n"), *body)


@pytest.mark.parametrize("seed", range(40))
def test_passes_keep_what_a_random_graph_returns(seed):
    assert checks_enabled()  # every pass below checks its result (tests/conftest.py)
    raw = random_graph(seed)
    annotated = annotate(raw)
    merged = merge_into_producers(annotated)
    merged.check()
    paths = set()
    for n in range(-2, 5):
        for x in (1, 7):
            expected, path = run(raw, x=x, n=n)
            assert run(annotated, x=x, n=n)[0] == expected
            assert run(merged, x=x, n=n)[0] == expected
            paths.add(tuple(p for p in path if p.startswith("cond")))
    assert len(paths) >= 1


def test_the_random_graphs_exercise_dead_code_merging_and_many_paths():
    dropped = merges = 0
    paths = set()
    for seed in range(40):
        raw = random_graph(seed)
        annotated = annotate(raw)
        dropped += sum(len(s.statements) for s in raw.sub_dnns) - sum(len(s.statements) for s in annotated.sub_dnns)
        merges += len(annotated.sub_dnns) - len(merge_into_producers(annotated).sub_dnns)
        paths |= {(seed, tuple(run(raw, x=1, n=n)[1])) for n in range(-2, 5)}
    assert dropped >= 20 and merges >= 5 and len(paths) >= 60, (dropped, merges, len(paths))
    assert sum(1 for seed in range(40) for n in walk(random_graph(seed).body) if type(n).__name__ == "Cond") >= 20


def test_merging_across_renames_keeps_what_a_random_graph_returns():
    merged_away = 0
    paths = set()
    for seed in range(40):
        raw = random_graph(seed, renames=0.6)
        annotated = annotate(raw)
        renamed = merge_across_renames(annotated)
        both = merge_into_producers(renamed)
        merged_away += len(annotated.sub_dnns) - len(renamed.sub_dnns)
        for n in range(-2, 5):
            for x in (1, 7):
                expected, path = run(raw, x=x, n=n)
                assert run(renamed, x=x, n=n)[0] == expected, (seed, n, x)
                assert run(both, x=x, n=n)[0] == expected, (seed, n, x)
                paths.add((seed, tuple(path)))
    assert merged_away >= 10 and len(paths) >= 60, (merged_away, len(paths))
