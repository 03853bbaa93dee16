"""Statements for the soundness patterns of issue 26: what `nn.Module.__call__`, the host and
the caller see besides the outputs.

:class:`Patterns26` draws, once per program and from its own random stream (so that a program
without them is the program of before), which of ``PROBABILITY``'s patterns it uses, and then
offers what exercises them:

- ``module-choice``: a data-dependent index or name chooses a submodule
  (``self.heads[int(x.mean() > 0)](x)``, ``getattr(self, f"head{int(...)}")(x)``);
- ``host-conditional``: a conditional expression on a tensor yields a host value (a string
  naming an activation or a head, a Python float);
- ``hooks``: forward hooks and pre-hooks registered in ``__init__`` (on opaque submodules, on
  the model, on a gate whose forward branches, and one that stores its output on the module,
  which dycl must refuse);
- ``input-mutation``: ``forward`` changes its argument in place before anything else (the
  runner compares the caller's tensor after the call, not only the outputs);
- ``sampling``: dropout in its functional (training) form, ``randn_like`` noise, a coin flip
  (the runner then compares crashes and refusals, not values);
- ``shape-test``: a test on the batch size, with inputs of several batch sizes (the first,
  the compile example, not always 1).

Every text keeps the generator's invariants: ``x`` stays finite and shaped ``(batch, width)``,
and no statement fails eagerly.
"""

from __future__ import annotations

import random

PROBABILITY = {"module-choice": 0.15, "host-conditional": 0.15, "hooks": 0.15, "input-mutation": 0.12,
               "sampling": 0.1, "shape-test": 0.15}

CHOICES = ["x = self.heads[int(x.mean() > 0)](x)", 'x = getattr(self, f"head{int(x.sum() > 0)}")(x)',
           "i = int(x.max() > 0.5)\nx = self.heads[i](x) + i * 0.1"]
CONDITIONALS = ['act = "relu" if x.mean() > 0 else "tanh"\nx = getattr(torch, act)(x) - 0.1',
                'key = "pos" if x.sum() > 0 else "neg"\nx = self.named[key](x)',
                "gain = 0.5 if x.max() > 0.8 else 1.5\nx = x * gain"]
SAMPLERS = ["x = nn.functional.dropout(x, 0.3)", "x = x + 0.01 * torch.randn_like(x)",
            "if torch.rand(()) < 0.5:\n    x = x * 0.5"]
SHAPE_TESTS = ["if x.shape[0] == 1:\n    x = x * 0.5", "if x.size(0) > 1:\n    x = x - x.mean(0, keepdim=True) * 0.5",
               "if x.shape[0] == 2:\n    x = torch.tanh(x)"]
MUTATIONS = ["x.mul_(0.5)", "x.add_(0.25).clamp_(-2.0, 2.0)", "x[:, 0] = 0.0"]
#: the statements above that decide something on data (each costs a condition)
DECIDING = frozenset(CHOICES + CONDITIONALS + SAMPLERS + SHAPE_TESTS)
# batch sizes of the inputs of a program with shape tests; the first is the compile example's
BATCHES = [(1, 2, 3), (2, 1, 3), (3, 1, 2)]
# hooks: (text in __init__, the submodule it needs: "" for none, "gate" for self.gates)
HOOKS = [
    ("self.fc0.register_forward_hook(lambda m, i, o: o + 0.5)", ""),
    ("self.layers[0].register_forward_pre_hook(lambda m, args: (args[0] * 0.5,))", ""),
    ("self.fc0.register_forward_hook(lambda m, a, kw, o: o * 0.9, with_kwargs=True)", ""),
    ("self.fc0.register_forward_hook(lambda m, i, o: None)", ""),
    ("self.register_forward_pre_hook(lambda m, args: (args[0] * 0.5,))", ""),
    ("self.fc0.register_forward_hook(lambda m, i, o: m.__dict__.update(last=o.detach()))", ""),
    ("self.gates[0].register_forward_hook(lambda m, i, o: o * 0.5)", "gate"),
]


class Patterns26:
    """The issue-26 patterns one program uses, and their statements."""

    def __init__(self, rng: random.Random, exclude: frozenset[str]) -> None:
        self.rng = rng
        self.on = {name: name not in exclude and rng.random() < p for name, p in PROBABILITY.items()}

    def statements(self) -> list[str]:
        """Statement texts for ``forward`` (weighted by repetition)."""
        out: list[str] = []
        for name, texts in (("module-choice", CHOICES), ("host-conditional", CONDITIONALS),
                            ("sampling", SAMPLERS), ("shape-test", SHAPE_TESTS)):
            if self.on[name]:
                out += [self.rng.choice(texts)] * 2
        return out

    def required(self) -> list[str]:
        """One statement per pattern in use that lives in ``forward``'s body (inserted if none is)."""
        return [self.rng.choice(texts) for name, texts in (("module-choice", CHOICES),
                                                          ("host-conditional", CONDITIONALS),
                                                          ("sampling", SAMPLERS), ("shape-test", SHAPE_TESTS))
                if self.on[name]]

    def first_statement(self) -> str | None:
        """The in-place change of the argument that starts ``forward``, if any."""
        return self.rng.choice(MUTATIONS) if self.on["input-mutation"] else None

    def init_lines(self, width: int, has_gate: bool) -> list[str]:
        """Lines at the end of ``__init__``: the heads the choices index and the hooks."""
        out = []
        if self.on["module-choice"]:
            out += [f"self.heads = nn.ModuleList([nn.Linear({width}, {width}), nn.Tanh()])",
                    f"self.head0 = nn.Linear({width}, {width})", "self.head1 = nn.Tanh()"]
        if self.on["host-conditional"]:
            out.append(f'self.named = nn.ModuleDict({{"pos": nn.Linear({width}, {width}), "neg": nn.Sigmoid()}})')
        if self.on["hooks"]:
            usable = [text for text, needs in HOOKS if needs != "gate" or has_gate]
            out += self.rng.sample(usable, self.rng.randint(1, 2))
        return out

    def batch_sizes(self) -> tuple[int, ...]:
        """The inputs' batch sizes, in turn (the first is the compile example's)."""
        return self.rng.choice(BATCHES) if self.on["shape-test"] else (1,)


__all__ = ["Patterns26", "PROBABILITY", "DECIDING"]
