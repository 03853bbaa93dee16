"""Statements for the soundness patterns of issue 14: mutable containers and module state.

:class:`Patterns` draws, once per program, which patterns the program uses (each with
its probability in ``PROBABILITY``, none of the excluded ones) and then offers, per
scope, statement texts that exercise them: local containers mutated by methods,
through aliases, by item and slice writes and ``del``; containers on ``self``;
buffers updated in place; and the static tests that read them.

Every text keeps two invariants, so no generated program fails eagerly: the list
``vals`` (and its alias ``view``) always holds at least two ints (removals are
guarded by ``len(...) > 2``, ``clear`` refills it), and the dict ``cfg`` (alias
``opts``) always has the int keys ``"a"``, ``"b"`` and ``"c"`` (only ``"d"`` comes and
goes). Initial values (5, 6, 7) differ from every value a mutation writes (0 to 4), so a
mutation that is lost shows. A text may hold several lines (a guarded removal), separated by ``\\n``.
"""

from __future__ import annotations

import random
from collections.abc import Callable

# the probability that a program uses each pattern; "alias" applies to programs with a list or dict
PROBABILITY = {
    "dict-mutation": 0.28, "list-mutation": 0.28, "set-mutation": 0.18, "alias": 0.7,
    "self-container": 0.2, "buffer-update": 0.2,
}
# statement texts tagged with a pattern that --exclude can also leave out on its own
ITEM_WRITE, DELETE = "item-write", "del"

LIST_OPS = [
    ("{T}.append({k})", ()), ("{T}.append(int(x.sum() > 0))", ()), ("{T}.extend([{k}, 1])", ()),
    ("{T}.insert(0, {k})", ()), ("{T} += [2]", ()), ("{T}[0] += 1", (ITEM_WRITE,)), ("{T}[-1] = {k}", (ITEM_WRITE,)),
    ("{T}[1:2] = [{k}, 2]", (ITEM_WRITE,)), ("{T}.sort()", ()), ("{T}.reverse()", ()), ("{T}.sort(reverse=True)", ()),
    ("if len({T}) > 2:\n    {T}.pop()", ()), ("if len({T}) > 2:\n    {T}.pop(0)", ()),
    ("if len({T}) > 2:\n    del {T}[0]", (DELETE,)), ("if len({T}) > 3:\n    del {T}[2:]", (DELETE,)),
    ("if len({T}) > 2:\n    {T}.remove({T}[-1])", ()), ("{T}.clear()\n{T}.extend([1, 2])", ()),
]
LIST_READS = ["x = x + vals[0] * 0.1", "x = x - vals[-1] * 0.1", "x = x * (1 + len(vals) * 0.05)",
              "x = x + sum(vals) * 0.02", "x = x + view[1] * 0.05"]
DICT_OPS = [
    ('{D}["a"] = {k} + 1', (ITEM_WRITE,)), ('{D}["b"] += 1', (ITEM_WRITE,)), ("{D}.update(c={k})", ()),
    ('{D}.update({{"a": 2, "d": 1}})', ()), ('{D}.setdefault("d", {k})', ()), ('{D}.pop("d", None)', ()),
    ('if "d" in {D}:\n    del {D}["d"]', (DELETE,)), ('{D}["c"] = int(x.sum() > 0)', (ITEM_WRITE,)),
    ("{D}.clear()\n{D}.update(a=1, b=2, c=0)", ()), ('{D} |= {{"b": 3}}', ()),
]
DICT_READS = ['x = x + cfg["a"] * 0.1', 'x = x * (1 + cfg.get("d", 0) * 0.1)', "x = x + len(cfg) * 0.05",
              'x = x - cfg["c"] * 0.2', 'x = x + opts["b"] * 0.05']
SET_OPS = ["seen.add({k})", "seen.discard(5)", "seen.add(int(x.sum() > 0))", "seen |= {{2}}"]
SET_READS = ["x = x + len(seen) * 0.1"]
# self containers: attribute -> (source in __init__, reads, mutations)
ATTRIBUTES = {
    "table": ("[0.5, 1.0, 1.5]", ["x = x * self.table[{k} % 3]", "x = x + self.table[-1] * 0.1"], []),
    "config": ('{"gain": 0.5, "shift": 0.1}', ['x = x * self.config["gain"] + self.config["shift"]'], []),
    "stats": ('{"calls": 0}', ['x = x + self.stats["calls"] * 0.01'],
              ['self.stats["calls"] += 1', 's = self.stats\ns["calls"] = s["calls"] + {k}']),
    "history": ("[]", ["x = x + len(self.history) * 0.01"],
                ["self.history.append(float(x.mean()))", "self.history.append({k})"]),
}
ATTRIBUTE_TESTS = {"table": "self.table[0] < 0.7", "config": 'self.config["gain"] > 0.4',
                   "stats": 'self.stats["calls"] > 3', "history": "len(self.history) > 5"}
BUFFERS = {"count": "scalar", "running": "vector"}
BUFFER_OPS = {
    "count": ["self.count.add_(1)", "self.count.add_(int(x.sum() > 0))", "torch.add(self.count, 1, out=self.count)",
              "self.count += 1"],
    "running": ["self.running.mul_(0.9).add_(x.mean(0) * 0.1)", "self.running.copy_(torch.tanh(x[0]))",
                "buf = self.running\nbuf.mul_(0.5)"],
}
BUFFER_READS = {"count": ["x = x + self.count * 0.01"], "running": ["x = x + self.running * 0.1"]}
BUFFER_TESTS = {"count": "self.count.item() > 3", "running": "self.running.sum() > 0"}


class Patterns:
    """The soundness patterns one program uses, and the statements and tests that exercise them."""

    def __init__(self, rng: random.Random, exclude: frozenset[str]) -> None:
        self.rng = rng
        self.exclude = exclude
        self.on = {name: name not in exclude and rng.random() < p for name, p in PROBABILITY.items()}
        self.on["alias"] &= self.on["dict-mutation"] or self.on["list-mutation"]
        self.attributes: dict[str, str] = {}
        if self.on["self-container"]:
            for name in rng.sample(sorted(ATTRIBUTES), rng.randint(1, 2)):
                self.attributes[name] = ATTRIBUTES[name][0]
        self.buffers: dict[str, str] = {}
        if self.on["buffer-update"]:
            for name in rng.sample(sorted(BUFFERS), rng.randint(1, 2)):
                self.buffers[name] = BUFFERS[name]

    def preamble(self) -> list[str]:
        """The first statements of ``forward``: the local containers and their aliases."""
        out = []
        if self.on["list-mutation"]:
            out += ["vals = [5, 6]", "view = vals" if self.on["alias"] else "view = list(vals)"]
        if self.on["dict-mutation"]:
            out.append('cfg = {"a": 5, "b": 6, "c": 7}')
            out.append("opts = cfg" if self.on["alias"] else "opts = dict(cfg)")
        if self.on["set-mutation"]:
            out.append("seen = {5}")
        return out

    def _ops(self, ops: list[tuple[str, tuple[str, ...]]], names: list[str], k: Callable[[], str]) -> list[str]:
        # item writes and del are rarer in the lists than methods: weigh them up
        allowed = [text for text, tags in ops for _ in range(1 + 2 * bool(tags)) if not set(tags) & self.exclude]
        return [self.rng.choice(allowed).format(T=self.rng.choice(names), D=self.rng.choice(names), k=k())]

    def mutation(self, feature: str, k: Callable[[], str]) -> str:
        """One statement that mutates the local container of ``feature`` ("list-mutation", ...)."""
        if feature == "set-mutation":
            return self.rng.choice(SET_OPS).format(k=k())
        names = {"list-mutation": ["vals", "view"], "dict-mutation": ["cfg", "opts"]}[feature]
        ops = LIST_OPS if feature == "list-mutation" else DICT_OPS
        return self._ops(ops, names if self.on["alias"] else names[:1], k)[0]

    def statements(self, function: str, k: Callable[[], str]) -> list[str]:
        """Statement texts for a body of ``function`` ("forward" or "helper"), weighted by repetition;
        ``k`` draws a static int expression."""
        rng, out = self.rng, []
        if function == "forward":
            # without "alias", view and opts are never mutated: view is then read only, opts a copy
            if self.on["list-mutation"]:
                names = ["vals", "view"] if self.on["alias"] else ["vals"]
                out += self._ops(LIST_OPS, names, k) * 5 + [rng.choice(LIST_READS)] * 3
            if self.on["dict-mutation"]:
                names = ["cfg", "opts"] if self.on["alias"] else ["cfg"]
                out += self._ops(DICT_OPS, names, k) * 5 + [rng.choice(DICT_READS)] * 3
            if self.on["set-mutation"]:
                out += [rng.choice(SET_OPS).format(k=k())] * 4 + SET_READS * 2
        for name in self.attributes:
            _, reads, mutations = ATTRIBUTES[name]
            out += [rng.choice(reads).format(k=k())]
            if mutations:
                out += [rng.choice(mutations).format(k=k())] * 2
        for name in self.buffers:
            out += [rng.choice(BUFFER_OPS[name])] * 2 + BUFFER_READS[name]
        return out

    def state_reads(self) -> list[list[str]]:
        """For each local container, buffer and mutable attribute in use, the statements that read it
        (one of them at the end of ``forward`` makes its mutations, and the state carried between
        calls, show in the outputs)."""
        reads = [reads for name, reads in (("list-mutation", LIST_READS), ("dict-mutation", DICT_READS),
                                           ("set-mutation", SET_READS)) if self.on[name]]
        reads += [BUFFER_READS[name] for name in self.buffers]
        return reads + [ATTRIBUTES[name][1] for name in self.attributes if ATTRIBUTES[name][2]]

    def state_updates(self) -> list[list[str]]:
        """For each buffer and mutable attribute in use, the statements that update it."""
        updates = [BUFFER_OPS[name] for name in self.buffers]
        return updates + [ATTRIBUTES[name][2] for name in self.attributes if ATTRIBUTES[name][2]]

    def static_tests(self, function: str) -> list[str]:
        """Tests on container values (static until a mutation makes them depend on the path or data)."""
        out = []
        if function == "forward":
            if self.on["list-mutation"]:
                out += ["len(vals) > 3", "vals[0] > 4"]
            if self.on["dict-mutation"]:
                out += ['cfg["b"] > 5', '"d" in cfg']
            if self.on["set-mutation"]:
                out += ["1 in seen", "len(seen) > 2"]
        out += [ATTRIBUTE_TESTS[name] for name in self.attributes]
        return out

    def tensor_tests(self) -> list[str]:
        """Tests on buffers (tensor tests: they cost a condition)."""
        return [BUFFER_TESTS[name] for name in self.buffers]
