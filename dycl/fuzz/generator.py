"""Random program trees: ``generate(seed, index)`` is a pure function of its arguments.

Only constructs dycl supports are generated: ``for`` over ``range`` / the layer
list / ``enumerate`` / the gate list, bounded ``while`` loops with a counter and
a tensor ``break``, ``if``/``elif``/``else`` on tensor and static tests,
``break``/``continue``/early ``return``, a Python list with ``append`` and
indexing, an int counter, helper methods called with a static int, a ``Gate``
submodule whose forward branches on data, and tuple returns mixing tensors and
Python scalars. The soundness patterns of ``FEATURES`` come on top, each drawn per
program with its probability (``PROGRAM_PROBABILITY`` here, the container and state
patterns in :mod:`dycl.fuzz.patterns`): mutated local containers and aliases, state
on ``self`` and in buffers, helpers with early exits inside submodules, forwards
swapped on instances, train mode, library functions, ``**kwargs`` callees,
decorated helpers and ``.data``; and issue 26's (:mod:`dycl.fuzz.patterns26`): submodules
chosen by data, conditional expressions yielding host values, hooks, inputs changed in place,
sampling ops and tests on the batch size with inputs of several batch sizes; and issue 27's constructs
(:mod:`dycl.fuzz.patterns27`): try/except, walrus, chained comparisons, conditional expressions on
tensors, loops bounded by a counter, match, Enum, max(key=), super(), generators and recursion with a
static depth; and the idioms of dynamic code (:mod:`dycl.fuzz.patterns_idioms`): host values as loop
bounds, ``tolist`` with Python builtins, ``torch.where``, reductions over a dim, ``topk``/``sort``, in-place
updates, lists built in loops then stacked, integer tensors; and the Python around tensors of
:mod:`dycl.fuzz.patterns_python`: loops over rows, data trip counts with a cap, host numbers typed by
the path, dtype tests, submodules picked by a data index, ``tensor_split`` at data points, ``.data``
updated in place, lists of host ints from data. Sizes are bounded
(trip counts <= 4, nesting depth <= 3, about 60 lines) and so is ``cost``, an estimate of the number of data-dependent
tests after unrolling, which keeps compilation fast.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from dycl.fuzz.features import FEATURES, KNOWN_BUGS, mentions  # noqa: F401 - FEATURES, KNOWN_BUGS re-exported
from dycl.fuzz.patterns import Patterns
from dycl.fuzz.patterns26 import DECIDING, Patterns26
from dycl.fuzz.patterns27 import Patterns27
from dycl.fuzz.patterns_fresh import FreshPatterns
from dycl.fuzz.patterns_idioms import IdiomPatterns
from dycl.fuzz.patterns_python import PythonPatterns
from dycl.fuzz.program import For, Helper, If, Line, Program, Stmt, While, count_lines, render_classes

# the probability that a program uses each program-level pattern (more in dycl.fuzz.patterns.PROBABILITY)
PROGRAM_PROBABILITY = {"nested-exit": 0.25, "swapped-forward": 0.15, "train-mode": 0.15, "library": 0.2,
                       "kwargs-callee": 0.1, "decorator": 0.2, "tensor-data": 0.15}
MAX_DEPTH = 3
MAX_TRIPS = 4
MAX_COST = 14
MAX_LINES = 60
PATTERN_LINES = 10  # more lines allowed to programs with the soundness patterns (their declarations, calls)
FORWARD_LINES = 30


@dataclass
class Scope:
    """Where a statement is generated: which function, how deep, inside which loops."""

    function: str  # "forward", "helper", "gate", "inner" (the gate's helper) or "library"
    depth: int = 0
    loops: list[str] = field(default_factory=list)  # "for", "while", "while+" (continue allowed)
    ints: list[str] = field(default_factory=list)  # static int names in scope (loop indices, k)
    layer_var: str | None = None
    gate_var: str | None = None
    multiplier: int = 1
    kwargs: bool = False  # the function has **kwargs

    def inner(self, loop: str | None = None, trips: int = 1, **changes) -> Scope:
        changes.setdefault("ints", list(self.ints))
        loops = self.loops + [loop] if loop else list(self.loops)
        return replace(self, depth=self.depth + 1, loops=loops, multiplier=self.multiplier * trips, **changes)


class _Generator:
    def __init__(self, rng: random.Random, name: str, seed: int, exclude: frozenset[str] = frozenset(),
                 feature_rng: random.Random | None = None, issue26_rng: random.Random | None = None,
                 issue27_rng: random.Random | None = None, fresh_rng: random.Random | None = None,
                 idiom_rng: random.Random | None = None, python_rng: random.Random | None = None) -> None:
        self.rng = rng
        self.exclude = exclude
        # the patterns come from their own stream, so that adding one leaves the other draws alone
        feature_rng = feature_rng or random.Random(0)
        self.patterns = Patterns(feature_rng, exclude)
        self.on = {name: name not in exclude and feature_rng.random() < p for name, p in PROGRAM_PROBABILITY.items()}
        # issue 26's patterns from a third stream: a program without them draws as before
        self.patterns26 = Patterns26(issue26_rng or random.Random(0), exclude)
        # and issue 27's constructs from a fourth
        self.patterns27 = Patterns27(issue27_rng or random.Random(0), exclude)
        # and the fresh patterns from a fifth
        self.fresh_patterns = FreshPatterns(fresh_rng or random.Random(0), exclude)
        # and the idioms of dynamic code from a sixth
        self.idioms = IdiomPatterns(idiom_rng or random.Random(0), exclude)
        # and the Python around tensors of session 11 from a seventh
        self.python = PythonPatterns(python_rng or random.Random(0), exclude)
        self.library: list[Helper] = []
        self.library_cost: dict[str, int] = {}
        self.gate_inner: list[Stmt] | None = None
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
        self.leading = 0  # statements that must start forward (the argument changed in place, inp = x)

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
        names = {"forward": ["x", "x", "x", "h", "outs[-1]"], "helper": ["x"], "gate": ["x", "y", "y"],
                 "inner": ["x"], "library": ["x"]}
        v = rng.choice(names[scope.function])
        if scope.function in ("forward", "helper") and self.patterns.buffers and rng.random() < 0.2:
            return rng.choice(self.patterns.tensor_tests())
        if self.on["tensor-data"] and rng.random() < 0.4:
            return f"{v}.data.sum() > {rng.choice(['0', '0.3', '-0.3'])}"
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
        extra = ['kwargs.get("scale", 1.0) < 0.7'] * 2 if scope.kwargs else []
        if self.on["train-mode"] and scope.function in ("forward", "helper", "gate"):
            extra += ["self.training", "not self.training"] * 2
        if scope.function in ("inner", "library"):
            return rng.choice([f"k % 2 == {rng.randint(0, 1)}", f"k > {rng.randint(0, 2)}", "k == 0"])
        if scope.function == "gate":
            test = f"self.fc.in_features > {rng.randint(4, 8)}"
            return rng.choice([test] * 2 + extra) if extra else test
        options = ["self.flag", "not self.flag", f"self.limit > {rng.randint(1, 3)}"] + extra
        options += self.patterns.static_tests(scope.function) * 2
        if scope.ints:
            i = rng.choice(scope.ints)
            options += [f"{i} % 2 == 0", f"{i} == 0", f"{i} > {rng.randint(0, 2)}", f"{i} % 2 == 1"] * 2
        if scope.function == "forward":
            options += [f"n > {rng.randint(0, 2)}", "n == 0", f"len(outs) > {rng.randint(1, 3)}",
                        "n < self.limit"]
        return rng.choice(options)

    def simple(self, scope: Scope) -> str:
        """One simple statement that fits ``scope`` (the draws' order is part of ``generate``'s output)."""
        rng = self.rng
        common = ["x = torch.tanh(x)", "x = x * 0.5", "x = x * -0.9", "x = -x", "x = x + 0.5", "x = x - 0.25",
                  "x = x.relu() - 0.1", f"x = self.layers[{self.int_expr(scope)} % {{L}}](x)",
                  f"x = x + {self.int_expr(scope)} * 0.1"]
        if scope.ints:
            common.append(f"x = x * ({rng.choice(scope.ints)} + 1) * 0.5")
            # a static value folded under a tighter operator: (k - 2) ** 2 must not become -2 ** 2
            common.append(f"x = x * (({rng.choice(scope.ints)} - 2) ** 2 * 0.1 + 0.5)")
        if scope.function == "gate":
            return rng.choice(["x = x + torch.tanh(y)", "y = y * 0.5", "x = x * 0.5", "x = x - y * 0.25",
                               "y = torch.tanh(y + x)"])
        if scope.function in ("inner", "library"):
            options = ["x = x * 0.5", "x = -x", "x = x - 0.25", "x = x + k * 0.1", "x = torch.tanh(x)"]
            return rng.choice(options + (["x = torch.tanh(self.fc(x))"] * 2 if scope.function == "inner" else []))
        options = common + self.patterns.statements(scope.function, lambda: self.int_expr(scope))
        if scope.kwargs:
            options.append('x = x * kwargs.get("scale", 1.0)')
        if self.library:
            options += ["LIBRARY"] * 2
        options += [f"x = self.fc{rng.randrange(self.n_fc)}(x)"] * 2
        if scope.layer_var:
            options += [f"x = {scope.layer_var}(x)"] * 3
        if scope.function == "forward":
            options += self.forward_statements(scope)
        return self.chosen(rng.choice(options), scope)

    def forward_statements(self, scope: Scope) -> list[str]:
        """The simple statements only ``forward`` has (on ``h``, ``outs``, ``n``, the gates and helpers)."""
        rng = self.rng
        # h keeps one row and list reads take one, so x (whose rows vary with batch-resize) always broadcasts
        options = ["h = x[:1] * 0.9", "h = torch.tanh(h + x[:1])", "x = x + h * 0.5", "x = (x + h) * 0.5",
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
            scale = ", scale=0.8" if self.on["kwargs-callee"] and rng.random() < 0.5 else ""
            options.append(f"x = self.gates[{rng.randrange(self.n_gates)}](x{scale})")
        if self.helpers:
            options += ["HELPER"] * 2
        return options + self.patterns26.statements()

    def chosen(self, choice: str, scope: Scope) -> str:
        """The statement ``choice`` stands for (a helper or library call is drawn here), with its cost counted."""
        rng = self.rng
        if choice == "HELPER":
            helper = rng.choice(self.helpers)
            self.cost += self.helper_cost[helper.name] * scope.multiplier
            self.tensor_tests += 1
            scale = f", scale={rng.choice(['0.5', '0.9'])}" if helper.kwargs and rng.random() < 0.6 else ""
            return f"x = self.{helper.name}(x, {self.int_expr(scope)}{scale})"
        if choice == "LIBRARY":
            function = rng.choice(self.library)
            self.cost += self.library_cost[function.name] * scope.multiplier
            self.tensor_tests += scope.function == "forward"
            return f"x = {function.name}(x, {self.int_expr(scope)})"
        if choice.startswith("if ") or choice in DECIDING:  # a guarded container removal or an issue-26
            self.cost += scope.multiplier  # choice, conditional or test: its test may depend on the path
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
        elif scope.function in ("helper", "inner", "library"):
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
            text = self.simple(scope)
            self.lines += text.count("\n") + 1
            return Line(text)
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
        if scope.function in ("inner", "library"):  # no self.layers there
            kinds = ["range"]
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
        scope = Scope("gate", depth=1, kwargs=self.on["kwargs-callee"])
        body: list[Stmt] = []
        if self.on["nested-exit"]:
            body.append(self.inner_loop(scope))
        first = self.if_stmt(scope, 4, force_tensor=True)
        self.gate_body = body + [first] + self.block(scope, 0, 1, 2)
        self.gate_cost = max(1, self.cost - start)
        self.cost = start

    def exiting_function(self, scope: Scope) -> list[Stmt]:
        """A helper's body: a few statements around a tensor ``if`` (the first branch of which
        returns early, for the gate's inner helper and library functions)."""
        body = self.block(scope, 0, 1, 3)
        test = self.if_stmt(scope, 5, force_tensor=True)
        if scope.function in ("inner", "library") and not (test.bodies[0] and "return" in test.bodies[0][-1].text):
            test.bodies[0].append(self.exit_stmt(scope))
            self.lines += 1
        body.append(test)
        return body + self.block(scope, 0, 1, 2)

    def inner_loop(self, scope: Scope) -> For:
        """``for i in range(t): x = self._inner(x, i)`` (then maybe an early return of the gate):
        a helper that returns early, called from a loop, inside a submodule."""
        start = self.cost
        self.gate_inner = self.exiting_function(Scope("inner", depth=1, ints=["k"]))
        inner_cost = max(1, self.cost - start)
        trips = self.rng.randint(2, 3)
        target = self.fresh("i")
        body: list[Stmt] = [Line(f"x = self._inner(x, {target})")]
        self.cost = start + inner_cost * trips
        self.lines += 4
        if self.rng.random() < 0.5:
            body.append(If([self.tensor_test(scope)], [[Line("return x")]]))
            self.cost += trips
            self.lines += 2
        return For(target, "range", body, trips)

    def make_helper(self, index: int) -> None:
        name = f"_helper{index}"
        start = self.cost
        kwargs = self.on["kwargs-callee"]
        scope = Scope("helper", depth=1, ints=["k"], kwargs=kwargs)
        body = self.exiting_function(scope)
        decorator = self.rng.choice(["halve", "squash"]) if self.on["decorator"] else None
        self.helpers.append(Helper(name, body, kwargs=kwargs, decorator=decorator))
        self.helper_cost[name] = max(1, self.cost - start)
        self.cost = start

    def uses_patterns(self) -> bool:
        """Whether some pattern of ``PROGRAM_PROBABILITY`` or :mod:`dycl.fuzz.patterns` was drawn."""
        return (any(self.on.values()) or any(self.patterns.on.values()) or any(self.patterns26.on.values())
                or any(self.patterns27.on.values()) or any(self.fresh_patterns.on.values())
                or any(self.idioms.on.values()) or any(self.python.on.values()))

    def use_drawn_callees(self, body: list[Stmt], first: int) -> None:
        """Call the gate, a helper and a library function from ``body`` (top level, from index
        ``first``) if it does not already: the patterns drawn for them would otherwise be dropped as
        unused, and most often from the programs that exercise them most (the dearest ones, redrawn
        for their cost)."""
        calls = []
        gate_patterns = self.on["nested-exit"] or self.on["kwargs-callee"] or self.on["swapped-forward"]
        if self.gate_body is not None and gate_patterns and not _uses(body, "self.gates"):
            calls.append((Line(f"x = self.gates[{self.rng.randrange(self.n_gates)}](x)"), self.gate_cost))
        if self.helpers and (self.on["kwargs-callee"] or self.on["decorator"]) and not _uses(body, "self._helper"):
            helper = self.rng.choice(self.helpers)
            calls.append((Line(f"x = self.{helper.name}(x, {self.rng.randint(0, 3)})"), self.helper_cost[helper.name]))
        if self.library and not any(_uses(b, "lib_step") for b in [body] + [h.body for h in self.helpers]):
            function = self.rng.choice(self.library)
            calls.append((Line(f"x = {function.name}(x, {self.rng.randint(0, 3)})"), self.library_cost[function.name]))
        for line, cost in calls:
            body.insert(self.rng.randint(first, len(body)), line)
            self.cost += cost
            self.lines += 1
            self.tensor_tests += 1

    def observe_patterns(self, body: list[Stmt], first: int) -> None:
        """Make every drawn container and state pattern count: a container declared but never mutated,
        or state never updated, tests nothing, nor does a mutation no output depends on. So mutate at
        the top level of ``body`` (from index ``first``, after the declarations) what nothing mutates,
        and read at its end what nothing reads."""
        rng = self.rng
        texts = "\n".join(_texts(body))
        for feature in ("list-mutation", "dict-mutation", "set-mutation"):
            if self.patterns.on[feature] and not mentions(feature, texts):
                text = self.patterns.mutation(feature, lambda: str(rng.randint(0, 3)))
                body.insert(rng.randint(first, len(body)), Line(text))
                self.lines += text.count("\n") + 1
        bodies = [body] + [h.body for h in self.helpers]
        for updates in self.patterns.state_updates():
            if not any(_uses(b, update.split("{")[0]) for b in bodies for update in updates):
                text = rng.choice(updates).format(k=rng.randint(0, 3))
                body.insert(rng.randint(first, len(body)), Line(text))
                self.lines += text.count("\n") + 1
        for reads in self.patterns.state_reads():
            if not any(_uses(body, read.split("{")[0]) for read in reads):
                body.append(Line(rng.choice(reads).format(k=rng.randint(0, 3))))
                self.lines += 1

    def make_library_function(self, index: int) -> None:
        name = f"lib_step{index}"
        start = self.cost
        body = self.exiting_function(Scope("library", depth=1, ints=["k"]))
        self.library.append(Helper(name, body))
        self.library_cost[name] = max(1, self.cost - start)
        self.cost = start

    def program(self) -> Program:
        rng = self.rng
        if self.on["library"]:
            for index in range(rng.choice([1, 1, 2])):
                self.make_library_function(index)
        if rng.random() < 0.4 or self.on["nested-exit"]:
            self.make_gate()
        at_least = 1 if self.on["kwargs-callee"] or self.on["decorator"] else 0
        for index in range(max(at_least, rng.choice([0, 0, 1, 1, 2]))):
            self.make_helper(index)
        optional = (("item", "item-return"), ("outs", "list-return"))
        kinds = ["n", "h", "len", "last"] + [kind for kind, feature in optional if feature not in self.exclude]
        if self.patterns.on["list-mutation"]:
            kinds.append("vals")
        returns = ["x"] + rng.sample(kinds, rng.choice([0, 0, 1, 1, 2]))
        body: list[Stmt] = [Line("n = 0"), Line("outs = [x]"), Line("h = torch.tanh(x)")]
        body += [Line(text) for text in self.patterns.preamble()]
        scope = Scope("forward")
        if rng.random() < 0.5:
            body.append(Line("x = self.fc0(x)"))
        body += self.block(scope, 2, 6, FORWARD_LINES)
        first = 3 + len(self.patterns.preamble())  # the first statement after the declarations
        self.use_drawn_callees(body, first)
        self.observe_patterns(body, first)
        self.use_issue26_patterns(body, first)
        self.use_issue27_constructs(body, first)
        self.use_fresh_patterns(body, first)
        self.use_idioms(body, first)
        self.use_python(body, first)
        program = Program(
            name=self.name, seed=self.seed, width=self.width, scale=rng.choice([1.0, 2.0, 3.0]),
            layer_kinds=self.layer_kinds, n_fc=self.n_fc, flag=rng.random() < 0.5, limit=rng.randint(1, 4),
            body=body, returns=returns, helpers=self.helpers, gate_body=self.gate_body, n_gates=self.n_gates,
            gate_inner=self.gate_inner, gate_kwargs=self.on["kwargs-callee"] and self.gate_body is not None,
            gate_swap=self.on["swapped-forward"] and rng.random() < 0.5, swap_forward=self.on["swapped-forward"],
            train=self.on["train-mode"], library=self.library, buffers=dict(self.patterns.buffers),
            attributes=dict(self.patterns.attributes))
        _drop_unused(program)
        has_gate = program.gate_body is not None and program.n_gates > 0
        fresh = self.fresh_patterns
        program.init_lines = self.patterns26.init_lines(self.width, has_gate)
        program.init_lines += [line.format(w=self.width) for line in fresh.init_lines() + self.python.init_lines()]
        program.batch_sizes = self.patterns26.batch_sizes()
        program.module_lines = self.patterns27.module_lines() + fresh.module_lines()
        program.methods = self.patterns27.methods() + fresh.methods()
        program.base = self.patterns27.base()
        program.forward_decorator = fresh.decorator
        return program

    def use_fresh_patterns(self, body: list[Stmt], first: int) -> None:
        """The statements of each drawn fresh pattern, at the top level of ``body`` (from index ``first``),
        and ``inp = x`` first where the argument is changed later."""
        self.insert_required(body, first, self.fresh_patterns.required())
        first_statement = self.fresh_patterns.first_statement()
        if first_statement:
            body.insert(0, Line(first_statement))
            self.leading += 1
            self.lines += first_statement.count("\n") + 1
            if first_statement.startswith("if "):  # a test on data
                self.cost += 1
                self.tensor_tests += 1

    def use_idioms(self, body: list[Stmt], first: int) -> None:
        """A statement or two of each drawn idiom of dynamic code, at the top level of ``body`` (from
        index ``first``)."""
        self.insert_required(body, first, self.idioms.required())

    def use_python(self, body: list[Stmt], first: int) -> None:
        """A statement or two of each drawn construct of :mod:`dycl.fuzz.patterns_python`, at the top
        level of ``body`` (from index ``first``), and ``src = x`` where one reads the argument: after the
        statements that start ``forward`` (an alias taken before the argument's in-place change would be
        refused for that, not for these constructs)."""
        required = self.python.required()
        self.insert_required(body, first, required)
        first_statement = self.python.first_statement(required)
        if first_statement:
            body.insert(self.leading, Line(first_statement))
            self.lines += 1

    def insert_required(self, body: list[Stmt], first: int, required: list[tuple[str, int]]) -> None:
        """Insert each ``(text, cost)`` of ``required`` at a random top-level place of ``body`` (from
        index ``first``), counting its lines, its cost and a data-dependent test."""
        for text, cost in required:
            body.insert(self.rng.randint(first, len(body)), Line(text))
            self.lines += text.count("\n") + 1
            self.cost += cost
            self.tensor_tests += 1

    def use_issue27_constructs(self, body: list[Stmt], first: int) -> None:
        """A statement of each drawn issue-27 construct, at the top level of ``body`` (from index ``first``)."""
        self.insert_required(body, first, self.patterns27.required())

    def use_issue26_patterns(self, body: list[Stmt], first: int) -> None:
        """Make every drawn issue-26 pattern show in ``forward``: a statement of each (at the top
        level of ``body``, from index ``first``) where none was drawn, and the argument's in-place
        change as the first statement."""
        texts = "\n".join(_texts(body))
        for text in self.patterns26.required():
            if text.split("\n")[0] not in texts:
                body.insert(self.rng.randint(first, len(body)), Line(text))
                self.lines += text.count("\n") + 1
                self.cost += 1
                self.tensor_tests += 1
        mutation = self.patterns26.first_statement()
        if mutation is not None:
            body.insert(0, Line(mutation))
            self.leading += 1
            self.lines += 1


def _texts(body: list[Stmt]):
    """The text of every line and test in ``body``, nested ones included."""
    for stmt in body:
        if isinstance(stmt, Line):
            yield stmt.text
        elif isinstance(stmt, If):
            yield from stmt.tests
            for branch in [*stmt.bodies, stmt.orelse or []]:
                yield from _texts(branch)
        else:
            yield from _texts(stmt.body)


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
    """Remove helpers, the gate class, library functions, attributes and buffers that are never used."""
    program.helpers = [h for h in program.helpers if _uses(program.body, f"self.{h.name}(")]
    if program.gate_body is not None and not _uses(program.body, "self.gates"):
        program.gate_body = None
        program.gate_inner = None
        program.gate_swap = program.gate_kwargs = False
        program.n_gates = 0
    callers = [program.body] + [h.body for h in program.helpers]
    program.library = [f for f in program.library if any(_uses(body, f"{f.name}(") for body in callers)]
    program.attributes = {name: source for name, source in program.attributes.items()
                          if any(_uses(body, f"self.{name}") for body in callers)}
    program.buffers = {name: kind for name, kind in program.buffers.items()
                       if any(_uses(body, f"self.{name}") for body in callers)}


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
        # the same patterns for a while, so that redrawing programs that are too big does not favour
        # programs without them; then others, in case these never fit
        features = random.Random(f"dycl.fuzz.features:{seed}:{index}:{attempt}:{retry // 100}")
        issue26 = random.Random(f"dycl.fuzz.issue26:{seed}:{index}:{attempt}:{retry // 100}")
        issue27 = random.Random(f"dycl.fuzz.issue27:{seed}:{index}:{attempt}:{retry // 100}")
        fresh = random.Random(f"dycl.fuzz.fresh:{seed}:{index}:{attempt}:{retry // 100}")
        idioms = random.Random(f"dycl.fuzz.idioms:{seed}:{index}:{attempt}:{retry // 100}")
        python = random.Random(f"dycl.fuzz.python:{seed}:{index}:{attempt}:{retry // 100}")
        gen = _Generator(rng, name, program_seed(seed, index, attempt), frozenset(exclude), features, issue26,
                         issue27, fresh, idioms, python)
        program = gen.program()
        max_lines = MAX_LINES + PATTERN_LINES * gen.uses_patterns()
        if gen.cost == 0 or gen.cost > MAX_COST or count_lines(program) > max_lines:
            continue
        if gen.tensor_tests == 0:
            continue
        if program.batch_sizes != (1,) and mentions("batch-resize", render_classes(program)):
            continue  # a batch cut to 1 or 3 rows no longer adds to a tensor of the input's batch
        return program
    raise RuntimeError(f"could not generate a program for seed {seed} index {index}")  # pragma: no cover

