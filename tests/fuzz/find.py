"""Find generated programs with given features (deterministic: the first index that has them)."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from pathlib import Path

from dycl.fuzz.features import program_features
from dycl.fuzz.generator import generate
from dycl.fuzz.loader import make_inputs
from dycl.fuzz.program import Program
from dycl.fuzz.runner import loaded_program, run_eager


def program_with(features: Iterable[str], seed: int = 3, exclude: Iterable[str] = (), without: Iterable[str] = (),
                 limit: int = 2000) -> Program:
    """The first program of ``seed`` (generated without ``exclude``) that uses every one of ``features``
    and none of ``without``."""
    wanted, unwanted = set(features), set(without)
    for index in range(limit):
        program = generate(seed, index, exclude=frozenset(exclude))
        used = program_features(program)
        if wanted <= used and not unwanted & used:
            return program
    raise AssertionError(f"no program of seed {seed} with {sorted(wanted)} without {sorted(unwanted)}")


def draws_none(patterns: type, stream: str, index: int, seed: int = 5, blocks: int = 2) -> bool:
    """Whether program ``index`` of ``seed`` draws none of ``patterns``' constructs (a class built from
    the random stream ``dycl.fuzz.<stream>``) in its first ``blocks`` blocks of 100 redraws (the
    constructs are drawn once per block: ``generate``)."""
    return not any(any(patterns(random.Random(f"dycl.fuzz.{stream}:{seed}:{index}:0:{block}"), frozenset()).on.values())
                   for block in range(blocks))


def most_eager_paths(programs: Sequence[Program], features: Iterable[str], directory: Path, first: int = 3
                     ) -> dict[str, int]:
    """Per feature, the most eager paths that one of the ``first`` programs using it takes on 12 inputs
    (each runs eagerly: none is discarded)."""
    most: dict[str, int] = {}
    for name in features:
        for program in [p for p in programs if name in program_features(p)][:first]:
            with loaded_program(program, directory) as (_, model):
                _, paths = run_eager(model, make_inputs(program, 12))
            most[name] = max(most.get(name, 0), paths)
    return most
