"""Random program trees: ``generate(seed, index)`` is a pure function of its arguments.

Only constructs dycl supports are generated: ``for`` over ``range`` / the layer
list / ``enumerate`` / the gate list, bounded ``while`` loops with a counter and
a tensor ``break``, ``if``/``elif``/``else`` on tensor and static tests,
``break``/``continue``/early ``return``, a Python list with ``append`` and
indexing, an int counter, helper methods called with a static int, a ``Gate``
submodule whose forward branches on data, and tuple returns mixing tensors and
Python scalars. Sizes are bounded (trip counts <= 4, nesting depth <= 3, about
60 lines) and so is ``cost``, an estimate of the number of data-dependent
tests after unrolling, which keeps compilation fast.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from dycl.fuzz.program import For, Helper, If, Line, Program, Stmt, While, count_lines

FEATURES = {
    "item-arith": "x = x - x.mean().item() * 0.5: a Python float from .item() used in tensor arithmetic",
    "item-return": "x.sum().item() returned as a Python float",
    "list-read": "x = x + outs[0] * 0.1: a list element read into tensor arithmetic (outs is appended to later)",
    "list-return": "the list outs (its length depends on the path) returned",
    "int-counter": "n += int(x.sum() > 0): a counter that depends on data",
    "batch-resize": "x = torch.cat([x, x * 0.5], 0)[:3] and x = x[:1]: the batch size depends on the path",
}
# features that currently make dycl fail, each with a shrunk regression test in tests/fuzz_regressions/;
# `python -m dycl.fuzz --exclude known` and the fuzz tests leave them out until they are fixed.
# Fixed so far: "item-arith" and "list-read" (fd3b9f2), "batch-resize" (8e0ae2f).
KNOWN_BUGS: dict[str, str] = {}
MAX_DEPTH = 3
MAX_TRIPS = 4
MAX_COST = 14
MAX_LINES = 60
FORWARD_LINES = 30


@dataclass
class Scope:
    """Where a statement is generated: which function, how deep, inside which loops."""

    function: str  # "forward", "helper" or "gate"
    depth: int = 0
    loops: list[str] = field(default_factory=list)  # "for", "while", "while+" (continue allowed)
    ints: list[str] = field(default_factory=list)  # static int names in scope (loop indices, k)
    layer_var: str | None = None
    gate_var: str | None = None
    multiplier: int = 1

    def inner(self, loop: str | None = None, trips: int = 1, **changes) -> Scope:
        changes.setdefault("ints", list(self.ints))
        loops = self.loops + [loop] if loop else list(self.loops)
        return replace(self, depth=self.depth + 1, loops=loops, multiplier=self.multiplier * trips, **changes)


class _Generator:
    def __init__(self, rng: random.Random, name: str, seed: int, exclude: frozenset[str] = frozenset()) -> None:
        self.rng = rng
        self.exclude = exclude
        self.name = name
        self.seed = seed
        self.width = rng.randint(4, 8)
        self.layer_kinds = [rng.choice(["linear", "linear", "tanh", "relu", "sigmoid", "seq"])
                            for _ in range(rng.randint(1, 4))]
        if "linear" not in self.layer_kinds and "seq" not in self.layer_kinds:
            self.layer_kinds[0] = "linear"
        self.n_fc = rng.randint(1, 3)
        self.helpers: list[Helper] = []
        self.helper_cost: dict[str, int] = {}
        self.gate_body: list[Stmt] | None = None
        self.gate_cost = 0
        self.n_gates = 0
        self.cost = 0
        self.lines = 0
        self.counter = 0  # for fresh loop variable names
        self.tensor_tests = 0  # data-dependent tests in forward, counting helper and gate calls

    # -- pieces ------------------------------------------------------------------------------------

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def int_expr(self, scope: Scope) -> str:
        """A static int in 0..3: a loop index or ``k`` in scope, else a literal."""
        if scope.ints and self.rng.random() < 0.7:
            return self.rng.choice(scope.ints)
        return str(self.rng.randint(0, 3))

    def tensor_test(self, scope: Scope) -> str:
        rng = self.rng
        names = {"forward": ["x", "x", "x", "h", "outs[-1]"], "helper": ["x"], "gate": ["x", "y", "y"]}
        v = rng.choice(names[scope.function])
        if scope.function == "forward" and rng.random() < 0.1:
            v = "(x - h)"
        # Thresholds are 0 or values no degenerate vector hits exactly (a constant vector after relu,
        # + 0.5, ...) and never +-1.0, where tanh saturates (ONNX Runtime's tanh can return -1.0000001):
        # a test value within rounding of its threshold would make the backends disagree for no fault of dycl.
        forms = [
            lambda: f"{v}.sum() > {rng.choice(['0', '0.3', '-0.3', '0.7'])}",
            lambda: f"{v}.sum() < {rng.choice(['0', '0.3', '-0.3'])}",
            lambda: f"{v}.mean().item() < {rng.choice(['0', '0.07', '-0.07'])}",
            lambda: f"{v}.max() > {rng.choice(['0.45', '0.8', '1.5'])}",
            lambda: f"{v}.min() < {rng.choice(['-0.45', '-0.8', '-1.5'])}",
            lambda: f"float({v}.mean()) > {rng.choice(['0', '0.17'])}",
        ]
        return rng.choice(forms)()

    def static_test(self, scope: Scope) -> str:
        rng = self.rng
        if scope.function == "gate":
            return f"self.fc.in_features > {rng.randint(4, 8)}"
        options = ["self.flag", "not self.flag", f"self.limit > {rng.randint(1, 3)}"]
        if scope.ints:
            i = rng.choice(scope.ints)
            options += [f"{i} % 2 == 0", f"{i} == 0", f"{i} > {rng.randint(0, 2)}", f"{i} % 2 == 1"] * 2
        if scope.function == "forward":
            options += [f"n > {rng.randint(0, 2)}", "n == 0", f"len(outs) > {rng.randint(1, 3)}",
                        "n < self.limit"]
        return rng.choice(options)

    def simple(self, scope: Scope) -> str:
        rng = self.rng
        common = ["x = torch.tanh(x)", "x = x * 0.5", "x = x * -0.9", "x = -x", "x = x + 0.5", "x = x - 0.25",
                  "x = x.relu() - 0.1", f"x = self.layers[{self.int_expr(scope)} % {{L}}](x)",
                  f"x = x + {self.int_expr(scope)} * 0.1"]
        if scope.ints:
            common.append(f"x = x * ({rng.choice(scope.ints)} + 1) * 0.5")
        if scope.function == "gate":
            return rng.choice(["x = x + torch.tanh(y)", "y = y * 0.5", "x = x * 0.5", "x = x - y * 0.25",
                               "y = torch.tanh(y + x)"])
        options = list(common)
        options += [f"x = self.fc{rng.randrange(self.n_fc)}(x)"] * 2
        if scope.layer_var:
            options += [f"x = {scope.layer_var}(x)"] * 3
        if scope.function == "forward":
            # h keeps one row and list reads take one, so x (whose rows vary with batch-resize) always broadcasts
            options += ["h = x[:1] * 0.9", "h = torch.tanh(h + x[:1])", "x = x + h * 0.5", "x = (x + h) * 0.5",
                        "outs.append(x)", "outs.append(x)", "n += 1", "n += 1", "x = x + n * 0.1"]
            if "int-counter" not in self.exclude:
                options.append("n += int(x.sum() > 0)")
            if "list-read" not in self.exclude:
                options += ["x = x + outs[0] * 0.1", "x = (x + outs[-1][:1]) * 0.5"]
            if "batch-resize" not in self.exclude:
                options += ["x = torch.cat([x, x * 0.5], 0)[:3]", "x = x[:1]"]
            if "item-arith" not in self.exclude:
                options.append("x = x - x.mean().item() * 0.5")  # not all of it: mean(x) ~ 0 is a bad test
            if scope.ints:
                options.append(f"n += {rng.choice(scope.ints)}")
            if scope.gate_var:
                options += [f"x = {scope.gate_var}(x)"] * 3
            if self.gate_body is not None:
                options.append(f"x = self.gates[{rng.randrange(self.n_gates)}](x)")
            if self.helpers:
                options += ["HELPER"] * 2
        choice = rng.choice(options)
        if choice == "HELPER":
            helper = rng.choice(self.helpers)
            self.cost += self.helper_cost[helper.name] * scope.multiplier
            self.tensor_tests += 1
            return f"x = self.{helper.name}(x, {self.int_expr(scope)})"
        if "self.gates[" in choice or (scope.gate_var and choice.startswith(f"x = {scope.gate_var}(")):
            self.cost += self.gate_cost * scope.multiplier
            self.tensor_tests += 1
        return choice

    def exit_stmt(self, scope: Scope) -> Line:
        """``break``, ``continue`` or an early ``return`` that fits ``scope``."""
        rng = self.rng
        options = []
        if scope.loops:
            options += ["break"] * 2
            if scope.loops[-1] in ("for", "while+"):
                options.append("continue")
        if scope.function == "forward":
            first = rng.choice(["x * 0.5", "torch.tanh(x)", "-x", f"self.fc{rng.randrange(self.n_fc)}(x)"])
            options.append(first)
        elif scope.function == "helper":
            options += ["return x * 0.5", "return torch.tanh(x)"]
        else:
            options += ["return x + torch.tanh(y)", "return y"]
        choice = rng.choice(options)
        self.cost += scope.multiplier  # exits copy the rest of the function into branches
        if scope.function == "forward" and choice not in ("break", "continue"):
            return Line(returns=choice)
        return Line(choice)

    # -- compound statements ------------------------------------------------------------------------

    def block(self, scope: Scope, low: int, high: int, budget: int) -> list[Stmt]:
        out: list[Stmt] = []
        count = self.rng.randint(low, high)
        start = self.lines
        for _ in range(count):
            if self.lines - start >= budget:
                break
            out.append(self.statement(scope, budget - (self.lines - start)))
        return out

    def statement(self, scope: Scope, budget: int) -> Stmt:
        rng = self.rng
        compound_ok = scope.depth < MAX_DEPTH and budget >= 3 and self.cost < MAX_COST
        kinds = ["line"] * 4
        if compound_ok:
            kinds += ["if"] * 4
            if scope.multiplier < 8 and scope.function != "gate":
                kinds += ["for"] * 2
                if scope.depth + 1 < MAX_DEPTH:  # its break is one level deeper
                    kinds.append("while")
        kind = rng.choice(kinds)
        if kind == "line":
            self.lines += 1
            return Line(self.simple(scope))
        if kind == "if":
            return self.if_stmt(scope, budget)
        if kind == "for":
            return self.for_stmt(scope, budget)
        return self.while_stmt(scope, budget)

    def if_stmt(self, scope: Scope, budget: int, force_tensor: bool = False) -> If:
        rng = self.rng
        n_tests = rng.choice([1, 1, 1, 2, 2, 3])
        tests = []
        for i in range(n_tests):
            tensor = force_tensor and i == 0 or rng.random() < 0.7
            if tensor:
                self.cost += scope.multiplier
                self.tensor_tests += scope.function == "forward"
                tests.append(self.tensor_test(scope))
            else:
                tests.append(self.static_test(scope))
        self.lines += n_tests
        inner = scope.inner()
        share = max(1, budget // (n_tests + 1))
        bodies = [self.branch(inner, share) for _ in tests]
        orelse = None
        if rng.random() < 0.5:
            self.lines += 1
            orelse = self.branch(inner, share)
        return If(tests, bodies, orelse)

    def branch(self, scope: Scope, budget: int) -> list[Stmt]:
        body = self.block(scope, 0 if self.rng.random() < 0.3 else 1, 2, budget)
        if self.rng.random() < 0.3 or not body:
            body.append(self.exit_stmt(scope) if self.rng.random() < 0.6 or not body
                        else Line(self.simple(scope)))
            self.lines += 1
        return body

    def for_stmt(self, scope: Scope, budget: int) -> For:
        rng = self.rng
        kinds = ["range", "range", "layers", "enumerate"]
        if self.gate_body is not None and scope.function == "forward":
            kinds.append("gates")
        kind = rng.choice(kinds)
        self.lines += 1
        if kind == "range":
            trips = rng.randint(1, MAX_TRIPS)
            target = self.fresh("i")
            inner = scope.inner("for", trips, ints=scope.ints + [target])
        elif kind == "gates":
            trips = self.n_gates
            target = self.fresh("gate")
            inner = scope.inner("for", trips, gate_var=target)
        else:
            trips = len(self.layer_kinds)
            layer = self.fresh("layer")
            if kind == "enumerate":
                index = self.fresh("j")
                target = f"{index}, {layer}"
                inner = scope.inner("for", trips, ints=scope.ints + [index], layer_var=layer)
            else:
                target = layer
                inner = scope.inner("for", trips, layer_var=layer)
        body: list[Stmt] = []
        if kind in ("layers", "enumerate"):
            body.append(Line(f"x = {inner.layer_var}(x)"))
            self.lines += 1
        elif kind == "gates":
            self.cost += self.gate_cost * inner.multiplier
            self.tensor_tests += 1
            body.append(Line(f"x = {target}(x)"))
            self.lines += 1
        body += self.block(inner, 1, 3, budget - 2)
        return For(target, kind, body, trips if kind == "range" else 0)

    def while_stmt(self, scope: Scope, budget: int) -> While:
        rng = self.rng
        bound = rng.randint(2, MAX_TRIPS)
        increment_first = rng.random() < 0.4
        counter = self.fresh("step")
        self.lines += 3
        inner = scope.inner("while+" if increment_first else "while", bound, ints=scope.ints)
        body = self.block(inner, 1, 2, budget - 5)
        test = self.tensor_test(inner)
        self.cost += inner.multiplier
        self.tensor_tests += scope.function == "forward"
        stop: list[Stmt] = [Line("break")]
        if rng.random() < 0.3:
            stop.insert(0, Line(self.simple(inner.inner())))
        body.append(If([test], [stop]))
        self.lines += 2
        return While(counter, bound, body, increment_first)

    # -- whole program ------------------------------------------------------------------------------

    def make_gate(self) -> None:
        self.n_gates = self.rng.randint(1, 3)
        start = self.cost
        scope = Scope("gate", depth=1)
        first = self.if_stmt(scope, 4, force_tensor=True)
        self.gate_body = [first] + self.block(scope, 0, 1, 2)
        self.gate_cost = max(1, self.cost - start)
        self.cost = start

    def make_helper(self, index: int) -> None:
        name = f"_helper{index}"
        start = self.cost
        scope = Scope("helper", depth=1, ints=["k"])
        body = self.block(scope, 0, 1, 3)
        body.append(self.if_stmt(scope, 5, force_tensor=True))
        body += self.block(scope, 0, 1, 2)
        self.helpers.append(Helper(name, body))
        self.helper_cost[name] = max(1, self.cost - start)
        self.cost = start

    def program(self) -> Program:
        rng = self.rng
        if rng.random() < 0.4:
            self.make_gate()
        for index in range(rng.choice([0, 0, 1, 1, 2])):
            self.make_helper(index)
        optional = (("item", "item-return"), ("outs", "list-return"))
        kinds = ["n", "h", "len", "last"] + [kind for kind, feature in optional if feature not in self.exclude]
        returns = ["x"] + rng.sample(kinds, rng.choice([0, 0, 1, 1, 2]))
        body: list[Stmt] = [Line("n = 0"), Line("outs = [x]"), Line("h = torch.tanh(x)")]
        scope = Scope("forward")
        if rng.random() < 0.5:
            body.append(Line("x = self.fc0(x)"))
        body += self.block(scope, 2, 6, FORWARD_LINES)
        program = Program(
            name=self.name, seed=self.seed, width=self.width, scale=rng.choice([1.0, 2.0, 3.0]),
            layer_kinds=self.layer_kinds, n_fc=self.n_fc, flag=rng.random() < 0.5, limit=rng.randint(1, 4),
            body=body, returns=returns, helpers=self.helpers, gate_body=self.gate_body, n_gates=self.n_gates)
        _drop_unused(program)
        return program


def _uses(body: list[Stmt], needle: str) -> bool:
    for stmt in body:
        if isinstance(stmt, Line) and needle in stmt.text:
            return True
        if isinstance(stmt, If) and (any(needle in t for t in stmt.tests) or any(_uses(b, needle) for b in stmt.bodies)
                                     or (stmt.orelse is not None and _uses(stmt.orelse, needle))):
            return True
        if isinstance(stmt, For) and (stmt.kind == "gates" and needle == "self.gates" or _uses(stmt.body, needle)):
            return True
        if isinstance(stmt, While) and _uses(stmt.body, needle):
            return True
    return False


def _drop_unused(program: Program) -> None:
    """Remove helpers and the gate class that forward never uses."""
    program.helpers = [h for h in program.helpers if _uses(program.body, f"self.{h.name}(")]
    if program.gate_body is not None and not _uses(program.body, "self.gates"):
        program.gate_body = None
        program.n_gates = 0


def program_seed(seed: int, index: int, attempt: int) -> int:
    """The torch seed (weights and inputs) of program ``index`` of a campaign, at regeneration ``attempt``."""
    return random.Random(f"dycl.fuzz.torch:{seed}:{index}:{attempt}").randrange(2**31)


def generate(seed: int, index: int = 0, attempt: int = 0, exclude: frozenset[str] | set[str] = frozenset()) -> Program:
    """Program ``index`` of the campaign with master ``seed``; ``attempt`` > 0 draws a replacement
    for a program discarded because it failed eagerly. Programs that would be too big, too costly
    to compile or have no data-dependent test are redrawn internally (deterministically).
    ``exclude`` names features (see ``FEATURES``) not to generate, e.g. those with a known dycl bug."""
    unknown = set(exclude) - set(FEATURES)
    if unknown:
        raise ValueError(f"unknown fuzz features {sorted(unknown)}; known: {sorted(FEATURES)}")
    name = f"Fuzz_s{seed}_p{index}" + (f"_a{attempt}" if attempt else "")
    for retry in range(1000):
        rng = random.Random(f"dycl.fuzz:{seed}:{index}:{attempt}:{retry}")
        gen = _Generator(rng, name, program_seed(seed, index, attempt), frozenset(exclude))
        program = gen.program()
        if gen.cost == 0 or gen.cost > MAX_COST or count_lines(program) > MAX_LINES:
            continue
        if gen.tensor_tests == 0:
            continue
        return program
    raise RuntimeError(f"could not generate a program for seed {seed} index {index}")  # pragma: no cover

