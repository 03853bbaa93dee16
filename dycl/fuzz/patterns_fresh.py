"""Statements for constructs dycl learned after issue 27, written as people write them: the fuzzer's
fresh patterns (its fifth random stream).

:class:`FreshPatterns` draws, once per program and from its own random stream (so that a program
without them is the program of before), which of ``PROBABILITY``'s constructs it uses, and then
offers their statements, the lines they need in ``__init__``, at module level and as methods, and
the decorator of the root ``forward``:

- ``tensor-and-or``: ``and``/``or`` over two tensor tests, in ``if`` tests and as values;
- ``decorated-forward``: the root ``forward`` wrapped by a ``functools.wraps`` wrapper that decides
  on data, or by a class-based decorator (``__get__`` binding the module);
- ``state-hooks``: hooks that read and write module state (a call counter, a list of output means,
  a counter of data-dependent hits), which ``forward`` reads;
- ``trace-read``: ``forward`` appends to a list on ``self`` and reads it back (``self.trace[-1]``,
  ``sum(self.trace)``, ``len(self.trace)``);
- ``argmax-block``: a block picked by a data-dependent index (``self.blocks[int(x.argmax()) % 3]``);
- ``host-int-conditional``: ``k = 2 if x.mean() > 0 else 3`` used as a host number (a loop bound,
  an index, a factor);
- ``input-mutation-read``: the argument changed in place, then read: under another name (``inp``)
  later in ``forward``, under a data test or not, or under its own first, on either branch of a test;
- ``module-container-loop``: a ``ModuleDict``/``ModuleList`` iterated with a data-dependent
  ``continue`` or ``break``.

Every text keeps the generator's invariants: ``x`` stays finite and shaped ``(batch, width)``, and
no statement fails eagerly (reads of a list guard its emptiness). ``{w}`` in an ``__init__`` line
is the program's width; ``{L}`` in a statement is the number of layers (as in the generator).
"""

from __future__ import annotations

import random

PROBABILITY = {"tensor-and-or": 0.1, "decorated-forward": 0.08, "state-hooks": 0.08, "trace-read": 0.08,
               "argmax-block": 0.08, "host-int-conditional": 0.08, "input-mutation-read": 0.08,
               "module-container-loop": 0.08}

STATEMENTS = {
    "tensor-and-or": ["if x.sum() > 0 and x.max() > 0.8:\n    x = x * 0.5",
                      "if x.mean() > 0.1 or x.min() < -0.8:\n    x = torch.tanh(x)",
                      "ok = x.sum() > 0 and x.max() > 0.45\nx = x + ok * 0.1",
                      "x = x * 0.5 if x.sum() > 0 or x.max() > 1.5 else -x",
                      "g = x.max() > 0.8 or x.sum() < 0\nif g:\n    x = x - 0.25"],
    "state-hooks": ["x = x + self.calls * 0.01", "if self.calls % 2 == 0:\n    x = x * 0.5",
                    "if self.means and self.means[-1] > 0:\n    x = torch.tanh(x)",
                    "x = x + len(self.means) * 0.01", "x = x + self.hits * 0.05",
                    "if self.hits > 2:\n    x = x * 0.9"],
    "trace-read": ["self.trace.append(float(x.mean()))\nif self.trace[-1] > 0:\n    x = x * 0.5",
                   "self.trace.append(int(x.sum() > 0))\nx = x + sum(self.trace) * 0.01",
                   "self.trace.append(x.mean())\nx = x * (1 + len(self.trace) * 0.01) + self.trace[-1] * 0.1"],
    "argmax-block": ["x = self.blocks[int(x.argmax()) % 3](x)",
                     "idx = int(x[0].argmax()) % len(self.blocks)\nx = self.blocks[idx](x) + idx * 0.1",
                     "x = self.blocks[min(int(x.mean(0).argmax()), 2)](x)"],
    "host-int-conditional": ["k = 2 if x.mean() > 0 else 3\nfor r in range(k):\n    x = torch.tanh(x) * 0.9",
                             "k = 1 if x.max() > 0.8 else 0\nx = self.layers[k % {L}](x) + k * 0.1",
                             "k = 2 if x.sum() > 0 else 3\nx = x * k * 0.3"],
    "input-mutation-read": ["if inp.mean() > 0:\n    inp.add_(0.25)\nx = x + inp * 0.1",
                            "inp.mul_(0.5)\nif inp.sum() > 0:\n    x = x + inp * 0.2",
                            "inp.clamp_(-1.0, 1.0)\nx = (x + inp) * 0.5"],
    "module-container-loop": [
        'for name, stage in self.stages.items():\n    if name != "a" and x.sum() > 0:\n        continue\n'
        "    x = stage(x)",
        "for stage in self.stages.values():\n    x = stage(x)\n    if x.max() > 0.8:\n        break",
        "for i, layer in enumerate(self.stack):\n    if x.mean() < 0:\n        continue\n    x = layer(x) + i * 0.1",
        "for key in self.stages:\n    x = self.stages[key](x)\n    if x.abs().max() > 1.5:\n        break"],
}
#: the argument updated in place under a data test, first in forward, then read by what follows
DIRECT_UPDATE = "if x.mean() > 0:\n    x.add_(0.25)\nelse:\n    x.mul_(0.5)"
#: data-dependent tests each construct's statement adds (its cost for the generator)
COST = {"module-container-loop": 3, "argmax-block": 2, "host-int-conditional": 2, "state-hooks": 1}

# state hooks: (lines at the end of __init__, the reads of forward that need them)
HOOKS = [
    (["self.calls = 0", "self.register_forward_pre_hook(count_call)"], STATEMENTS["state-hooks"][:2]),
    (["self.means = []", "self.fc0.register_forward_hook(self._record)"], STATEMENTS["state-hooks"][2:4]),
    (["self.hits = 0", "self.register_forward_hook(count_hits)"], STATEMENTS["state-hooks"][4:]),
]
HOOK_FUNCTIONS = ["def count_call(module, args):", "    module.calls += 1", "", "",
                  "def count_hits(module, inputs, output):",
                  "    out = output[0] if isinstance(output, tuple) else output",
                  "    if out.sum() > 0:", "        module.hits += 1", "", ""]
RECORD_METHOD = ["    def _record(self, module, inputs, output):", "        self.means.append(float(output.mean()))"]
INIT = {
    "trace-read": ["self.trace = []"],
    "argmax-block": ["self.blocks = nn.ModuleList([nn.Linear({w}, {w}), nn.Tanh(), "
                     "nn.Sequential(nn.Linear({w}, {w}), nn.ReLU())])"],
    "module-container-loop": ['self.stages = nn.ModuleDict({{"a": nn.Linear({w}, {w}), "b": nn.Tanh(), '
                              '"c": nn.Linear({w}, {w})}})',
                              "self.stack = nn.ModuleList([nn.Linear({w}, {w}), nn.Sigmoid()])"],
}
# decorators of the root forward (defined at module level): name -> its source
DECORATORS = {
    "centered": ["def centered(fn):", "    @functools.wraps(fn)", "    def wrapper(self, x, *args, **options):",
                 "        if x.mean() > 0:", "            x = x - x.mean() * 0.5",
                 "        return fn(self, x, *args, **options)", "    return wrapper", "", ""],
    "tanh_out": ["def tanh_out(fn):", "    @functools.wraps(fn)", "    def wrapper(*args, **options):",
                 "        out = fn(*args, **options)", "        if isinstance(out, tuple):",
                 "            return (torch.tanh(out[0]),) + out[1:]", "        return torch.tanh(out)",
                 "    return wrapper", "", ""],
    "rescaled": ["class rescaled:", "    def __init__(self, fn):", "        functools.update_wrapper(self, fn)",
                 "        self.fn = fn", "", "    def __get__(self, obj, objtype=None):",
                 "        return self if obj is None else functools.partial(self, obj)", "",
                 "    def __call__(self, module, x, *args, **options):", "        if x.abs().max() > 2.0:",
                 "            x = x * 0.5", "        return self.fn(module, x, *args, **options)", "", ""],
}


class FreshPatterns:
    """The fresh constructs one program uses, and what they need."""

    def __init__(self, rng: random.Random, exclude: frozenset[str]) -> None:
        self.rng = rng
        self.on = {name: name not in exclude and rng.random() < p for name, p in PROBABILITY.items()}
        self.hooks = rng.sample(HOOKS, rng.randint(1, 2)) if self.on["state-hooks"] else []
        self.decorator = rng.choice(sorted(DECORATORS)) if self.on["decorated-forward"] else None
        # the argument updated under its own name, first, or under another (``inp``) later
        self.direct = self.on["input-mutation-read"] and rng.random() < 0.5

    def required(self) -> list[tuple[str, int]]:
        """Statements of ``forward``'s body, with their cost: one per construct in use, a second
        (another text where there is one) for some, so that a construct meets itself."""
        out = []
        hook_reads = [read for _, reads in self.hooks for read in reads]
        for name, on in self.on.items():
            texts = hook_reads if name == "state-hooks" else STATEMENTS.get(name)
            if name == "input-mutation-read" and self.direct:
                continue  # its statement is the first one
            if on and texts:
                for text in self.rng.sample(texts, min(len(texts), self.rng.choice([1, 1, 2]))):
                    out.append((text, COST.get(name, 1)))
        return out

    def first_statement(self) -> str | None:
        """First in ``forward``: ``inp = x`` (the argument, still there after ``x`` is rebound, updated
        later), or the argument updated under a data test before anything rebinds ``x``."""
        if not self.on["input-mutation-read"]:
            return None
        return DIRECT_UPDATE if self.direct else "inp = x"

    def init_lines(self) -> list[str]:
        """Lines at the end of ``__init__`` (``{w}``: the width)."""
        out = [line for name, lines in INIT.items() if self.on[name] for line in lines]
        return out + [line for lines, _ in self.hooks for line in lines]

    def module_lines(self) -> list[str]:
        out = list(DECORATORS[self.decorator]) if self.decorator else []
        return out + (HOOK_FUNCTIONS if self.hooks else [])

    def methods(self) -> list[str]:
        return [""] + RECORD_METHOD if any(lines is HOOKS[1][0] for lines, _ in self.hooks) else []


__all__ = ["FreshPatterns", "PROBABILITY"]
