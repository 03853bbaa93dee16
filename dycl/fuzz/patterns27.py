"""Statements for the constructs of issue 27: the Python people write in ``forward`` that dycl
used to refuse.

:class:`Patterns27` draws, once per program and from its own random stream (so that a program
without them is the program of before), which of ``PROBABILITY``'s constructs it uses, and then
offers their statements, the module-level definitions and methods they need, and the model's
base class:

- ``try-except``: ``try``/``except`` around a layer, ``try``/``finally`` with a counter;
- ``walrus``: ``if (m := x.mean()) > 0: ...``;
- ``chained-comparison``: ``if -0.3 < x.mean() < 0.3: ...`` on tensors;
- ``tensor-conditional``: a conditional expression choosing between tensors;
- ``counter-loop``: ``while <tensor test> and steps < 3`` (a loop bounded by a counter);
- ``match``: ``match`` on an int from data;
- ``enum``: an ``Enum`` member chosen from data, then tested with ``is``;
- ``max-key``: ``max(candidates, key=lambda t: ...)`` and ``key=`` a module-level function;
- ``super-call``: ``super().forward(x)`` into a user base class;
- ``generator``: a generator method consumed by a ``for`` loop in ``forward``;
- ``recursion``: a method calling itself with a static depth, branching on data.

Every text keeps the generator's invariants: ``x`` stays finite and shaped ``(batch, width)``,
``n`` (declared first in ``forward``) stays an int, and no statement fails eagerly.
"""

from __future__ import annotations

import random

PROBABILITY = {"try-except": 0.08, "walrus": 0.08, "chained-comparison": 0.08, "tensor-conditional": 0.08,
               "counter-loop": 0.08, "match": 0.08, "enum": 0.08, "max-key": 0.08, "super-call": 0.08,
               "generator": 0.08, "recursion": 0.08}

STATEMENTS = {
    "try-except": ["try:\n    x = self.fc0(x)\nexcept RuntimeError:\n    x = x * 0.5",
                   "try:\n    x = torch.tanh(x) + 0.1\nfinally:\n    n += 1"],
    "walrus": ["if (m := x.mean()) > 0:\n    x = x - m * 0.5", "if (top := x.max()) > 0.8:\n    x = x / (top + 1)"],
    "chained-comparison": ["if -0.3 < x.mean() < 0.3:\n    x = x * 1.5", "if 0 < x.sum() < 2:\n    x = torch.tanh(x)"],
    "tensor-conditional": ["x = x * 0.5 if x.sum() > 0 else torch.tanh(x)",
                           "x = (x if x.max() > 0.8 else -x) * 0.9"],
    "counter-loop": ["steps = 0\nwhile x.abs().max() > 0.5 and steps < 3:\n    x = x * 0.5\n    steps += 1"],
    "match": ["match int(x.sum() > 0):\n    case 1:\n        x = x * 0.5\n    case _:\n        x = torch.tanh(x)"],
    "enum": ["mode = Mode.UP if x.mean() > 0 else Mode.DOWN\nif mode is Mode.UP:\n    x = x * 0.5\nelse:\n    x = -x"],
    "max-key": ["x = max([x, x * 0.5, torch.tanh(x)], key=lambda t: t.sum())", "x = max((x, -x), key=score)"],
    "super-call": ["x = super().forward(x)"],
    "generator": ["for part in self._steps(x):\n    if part.sum() > 0:\n        x = x + part * 0.1"],
    "recursion": ["x = self._recurse(x, 2)"],
}
#: module-level definitions a construct needs (before the classes)
MODULE_LINES = {
    "enum": ["import enum", "", "", "class Mode(enum.Enum):", "    UP = 1", "    DOWN = 2", "", ""],
    "max-key": ["def score(t):", "    return float(t.abs().mean())", "", ""],
    "super-call": ["class Base(nn.Module):", "    def forward(self, x):", "        return torch.tanh(x) * 0.9", "",
                   ""],
}
#: methods of the model class a construct needs (indented as class members)
METHODS = {
    "generator": ["    def _steps(self, x):", "        for i in range(2):", "            yield x * (0.5 + 0.25 * i)"],
    "recursion": ["    def _recurse(self, x, depth):", "        if depth == 0:", "            return x",
                  "        if x.mean() > 0:", "            x = x * 0.5",
                  "        return self._recurse(torch.tanh(x), depth - 1)"],
}
#: data-dependent tests each construct's statement adds (its cost for the generator)
COST = {"recursion": 2, "generator": 2, "counter-loop": 3, "max-key": 1}


class Patterns27:
    """The issue-27 constructs one program uses, and what they need."""

    def __init__(self, rng: random.Random, exclude: frozenset[str]) -> None:
        self.rng = rng
        self.on = {name: name not in exclude and rng.random() < p for name, p in PROBABILITY.items()}

    def required(self) -> list[tuple[str, int]]:
        """One statement per construct in use, with its cost (inserted in ``forward``'s body)."""
        return [(self.rng.choice(STATEMENTS[name]), COST.get(name, 1)) for name, on in self.on.items() if on]

    def module_lines(self) -> list[str]:
        return [line for name, lines in MODULE_LINES.items() if self.on[name] for line in lines]

    def methods(self) -> list[str]:
        out: list[str] = []
        for name, lines in METHODS.items():
            if self.on[name]:
                out += [""] + lines
        return out

    def base(self) -> str:
        return "Base" if self.on["super-call"] else "nn.Module"


__all__ = ["Patterns27", "PROBABILITY"]
