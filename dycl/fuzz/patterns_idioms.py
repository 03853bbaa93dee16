"""Statements of the idioms people write in dynamic forward code: the fuzzer's sixth random stream.

:class:`IdiomPatterns` draws, once per program and from its own random stream (so that a program
without them is the program of before), which of ``PROBABILITY``'s idioms it uses, and offers one
statement (sometimes two) of each for ``forward``'s body:

- ``host-loop-bound``: ``.item()`` / ``float()`` / ``int()`` host values in arithmetic and as loop bounds;
- ``tolist-builtins``: ``x[0].tolist()`` then Python ``sorted`` / ``sum`` / ``max`` / a comprehension;
- ``where-host``: ``torch.where`` with a host scalar or a tensor on either side;
- ``dim-reduction``: reductions with ``dim`` / ``keepdim`` (mean, amax, max().values, norm, sum);
- ``topk-sort``: ``topk``, ``sort``, ``argmax``, ``argsort`` (values and indices both used);
- ``inplace-update``: ``x[mask] = v``, ``x.add_``, ``x.clamp_``, ``x[:, 0] += ...`` on a copy of ``x``;
- ``loop-list-stack``: a list built in a loop with ``break`` / ``continue``, then ``torch.stack`` / ``torch.cat``;
- ``int-tensor``: integer tensors (``.long()``, counts of a mask) with ``//`` and ``%``, mixed into float math.

Every text keeps the generator's invariants: ``x`` stays finite and shaped ``(batch, width)`` with
width >= 4 on every batch size, values stay bounded, and no statement fails eagerly on random inputs
(on the special ones of :mod:`dycl.fuzz.special` a statement may raise, ``int(nan)``: that input is
then dropped). A cast of a float to an integer, undefined for NaN and the infinities, is applied to
``torch.nan_to_num(x).clamp(...)`` only, so that eager and the backends agree by definition. The
indices ``topk`` returns are read through ``gather`` only: which of tied elements eager's ``topk``
returns is unspecified (CPU torch gives ``[2, 4]`` for ``zeros(1, 5).topk(2)``, ``[5, 4]`` at width 7,
ONNX Runtime ``[0, 1]``), so a raw index on tied inputs is no oracle (``argmax``, ``sort`` and
``argsort`` pick the first of ties in both and are read directly). Rows are centred only
half-way (``x - x.mean(dim=1, keepdim=True) * 0.5``), since a mean of exactly centred rows is rounding
noise around 0, the threshold of the generator's tests, and ``x`` is compared with its mean plus a margin
(``x > float(x.mean()) + 0.013``): on equal values (a ``relu`` of negatives) the mean of 8 is off by
an ulp in one summation order and exact in another, and ``x > mean`` flips.
"""

from __future__ import annotations

from dycl.fuzz.statement_patterns import StatementPatterns

PROBABILITY = {"host-loop-bound": 0.1, "tolist-builtins": 0.1, "where-host": 0.1, "dim-reduction": 0.1,
               "topk-sort": 0.1, "inplace-update": 0.1, "loop-list-stack": 0.1, "int-tensor": 0.1}

STATEMENTS = {
    "host-loop-bound": ["t = int(x.abs().mean().item() * 3) % 3\nfor r in range(t):\n    x = torch.tanh(x) * 0.9",
                        "bound = min(max(int(float(x.max()) * 2), 0), 3)\nfor r in range(bound):\n"
                        "    x = x * 0.8 + 0.1",
                        "scale = float(x.abs().mean())\nx = x / (scale + 1.0)",
                        "shift = x.sum().item()\nif shift > 0:\n    x = x - 0.1\nx = x * 0.5 + shift * 0.01"],
    "tolist-builtins": ["row = x[0].tolist()\nx = x + sorted(row)[-2] * 0.1",
                        "x = x + sum(x[0].tolist()) * 0.05",
                        "if max(x[0].tolist()) > 0.8:\n    x = x * 0.5",
                        "pos = [v for v in x[0].tolist() if v > 0]\nx = x + len(pos) * 0.1"],
    "where-host": ["s = float(x.mean()) + 0.013\nx = torch.where(x > s, x, x * 0.5)",
                   "x = torch.where(x > 0, x, torch.full_like(x, x.mean().item() * 0.5))",
                   "x = torch.where(x.abs() > 0.5, torch.tanh(x), x * 2.0)"],
    "dim-reduction": ["x = x - x.mean(dim=1, keepdim=True) * 0.5",
                      "x = x / (x.abs().amax(dim=-1, keepdim=True) + 1.0)",
                      "if x.sum(dim=1).max() > 0:\n    x = x * 0.5",
                      "x = x + x.max(dim=1, keepdim=True).values * 0.1",
                      "x = x * (x.norm(dim=1, keepdim=True) > 1.0) + x * 0.5"],
    "topk-sort": ["top, at = x.topk(2, dim=1)\nx = x + top[:, :1] * 0.1 + x.gather(1, at)[:, 1:] * 0.05",
                  "x = x.sort(dim=1).values * 0.5",
                  "x = x + x.argmax(dim=1, keepdim=True) * 0.1",
                  "i0 = int(x[0].argmax())\nx = x + x[:, i0:i0 + 1] * 0.1",
                  "order = x[0].argsort()\nx = x[:, order] * 0.9"],
    "inplace-update": ["x = x.clone()\nx[x > 0.5] = 0.5",
                       "x = x * 1.0\nx.sub_(0.1)",
                       "x = x.clone()\nx.clamp_(-1.0, 1.0)",
                       "x = x.clone()\nx[:, 0] += x.mean()",
                       "if x.sum() > 0:\n    x = x.clone()\n    x[x < 0] = 0.0"],
    "loop-list-stack": ["parts = []\nfor r in range(3):\n    x = torch.tanh(x) + 0.1\n    if x.mean() > 0.3:\n"
                        "        break\n    parts.append(x)\nif parts:\n    x = x + torch.stack(parts).mean(0) * 0.5",
                        "acc = []\nfor r in range(3):\n    if x[0, r] < 0:\n        continue\n"
                        "    acc.append(x[:, r:r + 1])\nif acc:\n"
                        "    x = x + torch.cat(acc, 1).sum(1, keepdim=True) * 0.1",
                        "chunks = [x]\nfor r in range(2):\n    chunks.append(torch.tanh(chunks[-1]))\n"
                        "x = torch.stack(chunks).mean(0)"],
    "int-tensor": ["q = (torch.nan_to_num(x).clamp(-8, 8) * 4).long()\nx = x + (q // 3) * 0.1 + (q % 3) * 0.05",
                   "c = (x > 0).sum(dim=1, keepdim=True)\nx = x + (c % 2) * 0.1 - (c // 2) * 0.05",
                   "if int((x > 0).sum()) % 2 == 0:\n    x = x * 0.5"],
}
#: data-dependent tests each idiom's statement adds (its cost for the generator)
COST = {"host-loop-bound": 2, "loop-list-stack": 3}


class IdiomPatterns(StatementPatterns):
    """The idioms one program uses, and their statements."""

    PROBABILITY, STATEMENTS, COST = PROBABILITY, STATEMENTS, COST


__all__ = ["COST", "IdiomPatterns", "PROBABILITY", "STATEMENTS"]
