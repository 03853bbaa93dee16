"""Find generated programs with given features (deterministic: the first index that has them)."""

from __future__ import annotations

from collections.abc import Iterable

from dycl.fuzz.features import program_features
from dycl.fuzz.generator import generate
from dycl.fuzz.program import Program


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
