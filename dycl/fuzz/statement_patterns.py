"""Constructs a fuzz program draws from a table: the shared draw of the idiom and Python streams.

Assumes a subclass sets ``PROBABILITY`` (each construct's chance of being in one program),
``STATEMENTS`` (its texts) and ``COST`` (data-dependent tests a text adds; 1 where absent).
Guarantees: the draws happen in the table's order, so one seed gives one program whatever else the
generator's other streams do."""

from __future__ import annotations

import random
from collections.abc import Mapping


class StatementPatterns:
    """The constructs one program uses, and their statements."""

    PROBABILITY: Mapping[str, float] = {}
    STATEMENTS: Mapping[str, list[str]] = {}
    COST: Mapping[str, int] = {}

    def __init__(self, rng: random.Random, exclude: frozenset[str]) -> None:
        self.rng = rng
        self.on = {name: name not in exclude and rng.random() < p for name, p in self.PROBABILITY.items()}

    def required(self) -> list[tuple[str, int]]:
        """Statements of ``forward``'s body with their cost: one per construct in use, two for some."""
        out = []
        for name, on in self.on.items():
            if on:
                for text in self.rng.sample(self.STATEMENTS[name], self.rng.choice([1, 1, 2])):
                    out.append((text, self.COST.get(name, 1)))
        return out


__all__ = ["StatementPatterns"]
