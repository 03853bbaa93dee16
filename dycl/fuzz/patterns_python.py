"""Statements of the Python people write around tensors that the grammar lacked until session 11:
the fuzzer's seventh random stream.

:class:`PythonPatterns` draws, once per program and from its own random stream (so that a program
without them is the program of before), which of ``PROBABILITY``'s constructs it uses, and offers one
statement (sometimes two) of each for ``forward``'s body, and the lines they need in ``__init__``:

- ``row-loop``: loops over a tensor's rows along a dim: ``for row in x`` (the batch, symbolic), ``zip``,
  ``enumerate`` and a comprehension over ``src.unbind(1)`` (the argument's columns: ``src = x`` first in
  ``forward``, the width static), ``max(src.unbind(1), key=...)``, and ``enumerate`` over the columns of
  a computed ``x``;
- ``capped-trip``: a loop whose trip count comes from data, capped by a constant
  (``range(min(int(t), 3))``);
- ``path-typed-number``: a host number whose Python type depends on the path (``s = 2`` / ``s = 0.5``),
  then used in arithmetic, in ``isinstance`` and in ``torch.tensor``;
- ``dtype-test``: ``x.dtype == torch.float32``, ``is_floating_point()`` on float and integer tensors;
- ``indexed-submodule``: a submodule of a ``ModuleList`` picked by a data-dependent index (``int(i)``, a
  0-d integer tensor, ``.item()``);
- ``tensor-split``: ``torch.tensor_split`` along the width at points computed from data;
- ``data-inplace``: in-place updates through ``.data`` (of a copy of ``x``, under a data test, and the
  CLIP idiom of clamping a parameter's ``.data`` in ``forward``);
- ``host-int-list``: a list of host ints built from data (``tolist()`` of counts and cumulative sums, a
  comprehension over a tensor or over a ``tolist()``), then read with ``sum`` / ``max`` / indexing.

Some texts are forms dycl refuses by design (a loop over the symbolic batch, ``int()`` of each element
of a tensor in a comprehension, a write to a parameter in ``forward``) or does not yet compile (the
columns of a computed tensor): the campaign counts those refusals per feature; the other texts are
the forms it compiles alone.

Every text keeps the generator's invariants: ``x`` stays finite and shaped ``(batch, width)`` with
width >= 4 on every batch size, and no statement fails eagerly on random inputs (an ``int()`` of a NaN
on the special inputs of :mod:`dycl.fuzz.special` raises: that input is then dropped). Thresholds are
never values a degenerate input hits exactly. Loops over the width read at most its first 3 columns,
so that their cost does not grow with the width. ``{w}`` in an ``__init__`` line is the program's width.
"""

from __future__ import annotations

import re

from dycl.fuzz.statement_patterns import StatementPatterns

PROBABILITY = {"row-loop": 0.1, "capped-trip": 0.1, "path-typed-number": 0.1, "dtype-test": 0.08,
               "indexed-submodule": 0.1, "tensor-split": 0.1, "data-inplace": 0.08, "host-int-list": 0.1}

STATEMENTS = {
    "row-loop": ["total = torch.zeros_like(x[0])\nfor row in x:\n    if row.sum() > 0:\n        total = total + row\n"
                 "x = x + total * 0.1",
                 "for a, b in zip(src.unbind(1), src[:, 1:].unbind(1)):\n    x = x + (a * b).unsqueeze(1) * 0.05",
                 "for i, col in enumerate(src[:, :3].unbind(1)):\n    if col.mean() > 0.3:\n"
                 "        x = x + col.unsqueeze(1) * (i + 1) * 0.1",
                 "best = max(src[:, :3].unbind(1), key=lambda c: float(c.sum()))\nx = x + best.unsqueeze(1) * 0.2",
                 "for i, col in enumerate(x[:, :3].unbind(1)):\n    if col.mean() > 0.3:\n"
                 "        x = x + col.unsqueeze(1) * (i + 1) * 0.1",
                 "cols = [torch.tanh(c) * (j + 1) for j, c in enumerate(src[:, :3].unbind(1))]\n"
                 "x = x + torch.stack(cols, 1).sum(1, keepdim=True) * 0.1"],
    "capped-trip": ["trips = (x > 0).sum()\nfor r in range(min(int(trips), 3)):\n    x = torch.tanh(x) * 0.9 + 0.05",
                    "for r in range(min(int(x.abs().sum() * 0.5), 2)):\n    x = x * 0.8 - r * 0.1",
                    "reps = min(int((x[0] > 0.3).sum()), 3)\nfor r in range(reps):\n    x = x + r * 0.1\n"
                    "x = x * (reps + 1) * 0.25"],
    "path-typed-number": ["if x.mean() > 0:\n    s = 2\nelse:\n    s = 0.5\nx = x * s + isinstance(s, int) * 0.1",
                          "s = 2 if x.sum() > 0.3 else 0.5\nx = x + torch.tensor(s) / 4",
                          "s = 3 if x.max() > 0.8 else 1.5\nx = x * (s // 1) * 0.2 + s * 0.1"],
    "dtype-test": ["if x.dtype == torch.float32:\n    x = x * 0.5",
                   "if x.is_floating_point():\n    x = torch.tanh(x)\nelse:\n    x = x.float()",
                   "q = (x > 0).to(torch.int64)\nif q.is_floating_point():\n    x = x + q\nelse:\n"
                   "    x = x + q.float() * 0.1",
                   "x = x if x.dtype == torch.float32 else x.float()\nif x.dtype != torch.float64:\n    x = x - 0.25"],
    "indexed-submodule": ["i = (x.mean(1) > 0).sum() % 3\nx = self.experts[int(i)](x)",
                          "pick = torch.argmin(x.sum(0)[:3])\nx = self.experts[pick](x) + 0.1",
                          "x = self.experts[(x[0, 0] > 0).int().item() + 1](x)"],
    "tensor-split": ["cut = int((x[0] > 0).sum())\nleft, right = torch.tensor_split(x, [cut], dim=1)\n"
                     "x = torch.cat([right, left * 0.5], 1)",
                     "cut = int((x[0] > 0.3).sum()) + 1\nparts = torch.tensor_split(x, (1, cut), dim=1)\n"
                     "x = torch.cat([p * (j + 1) * 0.5 for j, p in enumerate(parts)], 1)"],
    "data-inplace": ["x = x.clone()\nx.data.mul_(0.5)",
                     "x = x * 1.0\nx.data.add_(0.1)",
                     "self.temperature.data.clamp_(0.25, 1.5)\nx = x * self.temperature",
                     "x = x + 0.0\nif x.mean() > 0:\n    x.data.clamp_(-0.8, 0.8)"],
    "host-int-list": ["ks = [int(c > 0) for c in x.sum(0)]\nx = x * (1 + sum(ks) * 0.1)",
                      "counts = (x > 0).sum(1).tolist()\nx = x + max(counts) * 0.05",
                      "marks = (x[0] > 0.3).cumsum(0).tolist()\nx = x + marks[-1] * 0.1 - marks[1] * 0.05",
                      "idx = [j for j, v in enumerate(x[-1].tolist()) if v > 0]\nif idx:\n"
                      "    x = x + x[:, idx[0]:idx[0] + 1] * 0.1"],
}
#: the first statement of ``forward`` where a statement loops over the argument's columns
FIRST = "src = x"
#: data-dependent tests each construct's statement adds (its cost for the generator)
COST = {"row-loop": 3, "capped-trip": 3, "indexed-submodule": 2, "tensor-split": 2, "host-int-list": 2}
#: lines at the end of ``__init__`` a construct needs (``{w}``: the width)
INIT = {
    "indexed-submodule": ["self.experts = nn.ModuleList([nn.Linear({w}, {w}), nn.Tanh(), "
                          "nn.Sequential(nn.Linear({w}, {w}), nn.ReLU())])"],
    "data-inplace": ["self.temperature = nn.Parameter(torch.tensor(2.0))"],
}


class PythonPatterns(StatementPatterns):
    """The constructs one program uses, their statements and their ``__init__`` lines."""

    PROBABILITY, STATEMENTS, COST = PROBABILITY, STATEMENTS, COST

    @staticmethod
    def first_statement(required: list[tuple[str, int]]) -> str | None:
        """First in ``forward``: ``src = x`` (the argument, before ``x`` is rebound) where a statement of
        ``required`` reads ``src``."""
        return FIRST if any(re.search(r"\bsrc\b", text) for text, _ in required) else None

    def init_lines(self) -> list[str]:
        """Lines at the end of ``__init__`` (``{w}``: the width)."""
        return [line for name, lines in INIT.items() if self.on[name] for line in lines]


__all__ = ["COST", "PROBABILITY", "PythonPatterns", "STATEMENTS"]
