"""Pass: unroll every loop whose trip count is known at compile time."""

from __future__ import annotations

import libcst as cst
import torch
from dycl.rewriter.aliases import tracks
from dycl.rewriter.bounded_rows import Calculus, Definitions, row_bound
from dycl.rewriter.chosen_bounds import per_literal
from dycl.rewriter.data_loops import MAX_TRIPS, DataLoops, Element, literal_element, range_call
from dycl.rewriter.exits import Block, run_unless_exited
from dycl.rewriter.flow import Env, Exits, join
from dycl.rewriter.locations import comment_of, set_location, with_context
from dycl.rewriter.passes import ScopedFlowWalker
from dycl.rewriter.values import Static, holds_container, is_literal, literal_term, subscript_term
from dycl.rewriter.walk import bound_names, descendants

__all__ = ["MAX_TRIPS", "Element", "Unroll"]


class Unroll(DataLoops, ScopedFlowWalker):
    """Replaces ``for`` and ``while`` loops by their iterations.

    Assumes: the function body has been normalised (no ``with``, no ``try``).
    Guarantees: no ``for``/``while``/``break``/``continue`` remain in code that
    can run; each iteration starts with assignments of the loop targets
    (``i = 2``, ``blk = self.blocks[2]``); a ``break`` or ``continue`` under a
    dynamic test becomes an ``if``/``else`` whose fall-through branch holds the
    rest of the loop; every statement of an iteration carries its bindings in
    its location comment (``# net.py:90 [i=7]``, ``rewriter.locations``).
    ``for`` loops may iterate ranges, module containers,
    ``enumerate``/``zip``/``reversed``, dict views, literal sequences and lists
    of statically known length, and tensors whose row count depends on data but has a
    static bound (``rewriter.bounded_rows``: the experts a routing hit): those unroll to
    the bound, each iteration starting with ``if not (rows.shape[0] > i): break``; a
    ``range`` whose bound is a literal chosen by data (``k = 2 if c else 3``) becomes one loop
    per literal under a test (``rewriter.chosen_bounds``); a ``range(n)`` with ``n`` from data and
    a static cap, the rows of an input along a static dim and ``range`` of such a size unroll
    too (``rewriter.data_loops``); a
    ``while`` loop must have a test that is static
    on every iteration (a counter). Anything else raises ``UnsupportedError``.
    """

    name = "unroll"
    description = "unroll for/while loops with static trip counts; break/continue become if/else"

    def __init__(self, unit) -> None:
        super().__init__(unit)
        # the assignments so far, for bounded_rows (None: a name assigned some other way)
        self.definitions = Definitions()
        self.bound_in: dict[str, tuple[int, ...]] = {}  # name -> the blocks its last binding was walked in
        self.walked_in: dict[tuple[str, int], tuple[int, ...]] = {}  # (name, definition time) -> its blocks

    def _encloses(self, name: str) -> bool:
        """Whether the last binding of ``name`` was walked in a block that encloses the statement
        being walked (not in a branch or an iteration beside it)."""
        scopes = self.bound_in.get(name)
        return scopes is not None and tuple(self.scopes[:len(scopes)]) == scopes

    def statement(self, stmt: cst.BaseStatement, env: Env) -> tuple[Block, Exits]:
        if isinstance(stmt, cst.For):
            result = self.expand_for(stmt, env)
        elif isinstance(stmt, cst.While):
            result = self.expand_while(stmt, env)
        else:
            result = super().statement(self._row_displays(stmt, env), env)
        self._remember(stmt)
        return result

    def _remember(self, stmt: cst.BaseStatement) -> None:
        value = None
        if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign):
            assign = stmt.body[0]
            if len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name):
                value = assign.value
        for name in sorted(bound_names(stmt)):
            self.definitions.assign(name, value)
            self.bound_in[name] = tuple(self.scopes)
            self.walked_in[name, self.definitions.now] = tuple(self.scopes)

    def branch(self, stmt: cst.If, env: Env) -> tuple[Block, Exits]:
        self.flow.refuse_changes_in_test(stmt.test, env, stmt)
        return super().branch(stmt, env)  # constant propagation removes a dead branch

    # -- loops ---------------------------------------------------------------------------------

    def expand_for(self, loop: cst.For, env: Env) -> tuple[Block, Exits]:
        chosen = per_literal(loop, self.definitions, lambda node: self.flow.evaluate(node, env), self.ctx.namespace,
                             self._encloses)
        if chosen is not None:  # ``k = 2 if c else 3``, ``for _ in range(k)``: a loop per value (chosen_bounds)
            return self.block(chosen, env)
        inlined, loop = self.inline_iterable(loop, env)
        for line in inlined:
            env = self.flow.step(line, env).fall
            self._remember(line)
        elements, prologue = self.iteration(loop, env)
        prologue = inlined + prologue
        self._refuse_rebinding(loop, elements)
        for line in prologue:
            env = self.flow.step(line, env).fall
            self._remember(line)
        iterated = {n.value: env.get(n.value) for n in descendants(loop.iter)
                    if isinstance(n, cst.Name) and tracks(env.get(n.value))}
        iterations: list[Block] = []
        breaks: list[Env] = []
        current: Env | None = env
        for element in elements:
            if current is None:
                break
            bindings = self.bind(loop.target, element, loop)
            if element.exists is not None:  # the guard first: the row may not exist
                body, exits = self.block([self._exists_guard(element.exists, loop), *bindings,
                                          *loop.body.body], current)
                iteration = body
            else:
                for line in bindings:
                    current = self.flow.step(line, current).fall
                    self._remember(line)  # the target is that item now (``for x in (x[0], y):``)
                body, exits = self.block(list(loop.body.body), current)
                iteration = bindings + body
            iterations.append(with_context(iteration, _context(bindings)))
            breaks += exits.breaks
            current = join([exits.fall, *exits.continues])
            if current is not None and any(current.get(name) != fact for name, fact in iterated.items()):
                raise self.ctx.error(
                    "a for loop over a container that the loop changes", loop,
                    "iterate over a copy (`for x in list(xs):`) or collect the changes and apply them after the loop")
        return self.assemble(loop, iterations, breaks, current, prologue)

    def inline_iterable(self, loop: cst.For, env: Env) -> tuple[Block, cst.For]:
        """``for h in self._features(x):`` over a helper that ``Inline`` inlines (a generator,
        ``rewriter.generators``, or a helper that builds a list): the helper's body first,
        its result bound to a fresh name the loop iterates, whose length is then known."""
        if not isinstance(loop.iter, cst.Call) or self.flow.evaluate(loop.iter, env) is not None or range_call(
                loop.iter, self.flow.evaluate(loop.iter.func, env)):  # range(n) from data: _bounded_range
            return [], loop
        if self.elements(loop.iter, env, loop) is not None:  # zip(x.unbind(1), ...): rows of inputs
            return [], loop
        from dycl.rewriter.inline import Inline  # Inline's module imports the passes this one is beside

        name = self.ctx.namespace.fresh("iterated")
        line = set_location(cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], loop.iter)]),
                            comment_of(loop))
        inlined = Inline(self.unit).replace(line, env.copy())
        if len(inlined) == 1 and inlined[0] is line:
            return [], loop
        return inlined, loop.with_changes(iter=cst.Name(name))

    def _refuse_rebinding(self, loop: cst.For, elements: list[Element]) -> None:
        """An unrolled iteration reads its item through a name (``outs[2]``); Python
        iterates the object the loop started with, so the body must not rebind that name."""
        named = {n.value for e in elements for n in descendants(e.term) if isinstance(n, cst.Name)}
        rebound = named & bound_names(loop.body)
        if rebound:
            raise self.ctx.error(
                f"a for loop over {sorted(rebound)[0]}, which the loop assigns", loop,
                "iterate over a copy bound to a name of its own (`items = list(xs)`), or rename the variable")

    def expand_while(self, loop: cst.While, env: Env) -> tuple[Block, Exits]:
        iterations: list[Block] = []
        breaks: list[Env] = []
        current: Env | None = env
        while current is not None:
            self.flow.refuse_changes_in_test(loop.test, current, loop)
            runs, guard = self.while_test(loop, current)
            if not runs:
                break
            if len(iterations) >= MAX_TRIPS:
                raise self.ctx.error(f"a while loop that runs more than {MAX_TRIPS} iterations", loop)
            body, exits = self.block(guard + list(loop.body.body), current)
            iterations.append(with_context(body, f"iteration={len(iterations)}"))
            breaks += exits.breaks
            current = join([exits.fall, *exits.continues])
        return self.assemble(loop, iterations, breaks, current, [])

    def while_test(self, loop: cst.While, env: Env) -> tuple[bool, Block]:
        """Whether the loop runs another iteration, and the guard that iteration starts with.

        A test ``a and b and ...`` whose static conjuncts (a counter: ``steps < n``) are all
        true and whose others are dynamic runs an iteration that starts with ``if not
        (<the dynamic conjuncts>): break``; a false static conjunct ends the loop. Python
        evaluates the dynamic conjuncts before a false static one that follows them and
        then leaves the loop all the same: tests change nothing (``refuse_changes_in_test``).
        The ``else`` of such a loop would run only when the dynamic part is false, not on
        the ``break`` that stands for it, so it is refused.
        """
        test = self.flow.evaluate(loop.test, env)
        if test is not None:
            return bool(test.value), []
        dynamic: list[cst.BaseExpression] = []
        bounded = False
        for part in _conjuncts(loop.test):
            value = self.flow.evaluate(part, env)
            if value is None:
                dynamic.append(part)
            elif not value.value:
                return False, []
            else:
                bounded = True
        if not bounded:
            raise self.ctx.error(
                "a while loop whose condition depends on the input", loop,
                "bound the loop by a counter (while step < self.max_steps:) and `break` on the "
                "tensor condition inside the loop")
        if loop.orelse is not None:
            raise self.ctx.error("a while loop with an else clause whose condition depends on the input", loop,
                                 "set a flag where the loop breaks and test it after the loop")
        condition = dynamic[0] if len(dynamic) == 1 else cst.BooleanOperation(dynamic[0], cst.And(), dynamic[1])
        for part in dynamic[2:]:
            condition = cst.BooleanOperation(condition, cst.And(), part)
        negated = cst.UnaryOperation(cst.Not(), condition.with_changes(lpar=[cst.LeftParen()],
                                                                        rpar=[cst.RightParen()]))
        guard = cst.If(negated, cst.IndentedBlock([cst.SimpleStatementLine([cst.Break()])]))
        return True, [set_location(guard, comment_of(loop))]

    def assemble(self, loop: cst.For | cst.While, iterations: list[Block], breaks: list[Env],
                 completed: Env | None, prologue: Block) -> tuple[Block, Exits]:
        """Chain the iterations, threading break/continue, then the ``else`` clause."""
        orelse: Block = []
        exits_after = Exits(completed)
        if loop.orelse is not None and completed is not None:
            orelse, exits_after = self.block(list(loop.orelse.body.body), completed)
        code: Block = orelse
        for body in reversed(iterations):
            body = run_unless_exited(body, [], cst.Continue, self._flag("skipped"))
            code = run_unless_exited(body, code, cst.Break, self._flag("stopped"))
        fall = join([exits_after.fall, *breaks])
        return prologue + code, Exits(fall, exits_after.breaks, exits_after.continues)

    def _flag(self, base: str):
        return lambda: self.ctx.namespace.fresh(base)

    # -- what a for loop iterates over ---------------------------------------------------------------

    def iteration(self, loop: cst.For, env: Env) -> tuple[list[Element], Block]:
        """The elements ``loop`` iterates over, and statements that must run first."""
        elements = self.elements(loop.iter, env, loop)
        if elements is not None:
            return elements, []
        if isinstance(loop.iter, (cst.List, cst.Tuple)):
            return self._display_elements(loop, env)
        bounded = self._bounded_range(loop, env) or self._bounded_rows(loop, env)
        if bounded is not None:
            return bounded
        if range_call(loop.iter, self.flow.evaluate(loop.iter.func, env) if isinstance(loop.iter, cst.Call) else None):
            raise self.ctx.error(
                "a for loop over range(n) whose n comes from the input and has no static upper bound", loop,
                "cap the count with a static number (range(min(n, self.max_steps)), t.clamp(max=K)): dycl then "
                "unrolls that many iterations, each run only while i < n; an input's size is a cap only on a "
                "dim that dynamic= leaves static (not the batch dim, unless dynamic=False)")
        raise self.ctx.error(
            "a for loop over a value that is not known at compile time", loop,
            "iterate over range(...) with static bounds, a module container, or a list whose "
            "length does not depend on the input (the rows of an input along a dim that dynamic= leaves "
            "static unroll: for x, x.unbind(d), x[i], x.T; for other tensors, loop over range(K) with a static K "
            "and index the rows)")

    def elements(self, node: cst.BaseExpression, env: Env, loop: cst.For) -> list[Element] | None:
        builtin = self.flow.evaluate(node.func, env) if isinstance(node, cst.Call) else None
        if builtin is not None and builtin.value in (enumerate, zip, reversed) and not any(
                a.star for a in node.args):
            positional = [a.value for a in node.args if a.keyword is None]
            keywords = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
            iterables = positional if builtin.value is zip else positional[:1]
            parts = [self.elements(value, env, loop) for value in iterables]
            if not parts or any(p is None for p in parts):
                return None
            if builtin.value is reversed:
                return list(reversed(parts[0]))
            if builtin.value is zip:
                return [_tuple_element(items) for items in zip(*parts)]
            start_node = positional[1] if len(positional) > 1 else keywords.get("start")
            start = self.flow.evaluate(start_node, env) if start_node is not None else Static(0, None)
            if start is None:
                return None
            return [_tuple_element((literal_element(start.value + i), e)) for i, e in enumerate(parts[0])]
        length = self.flow.evaluator(env).list_length(node)
        if length is not None:
            return [Element(None, subscript_term(node, i)) for i in range(length)]
        static = self.flow.evaluate(node, env)
        if static is None:
            return self._tensor_rows(node, env, loop)
        return self._static_elements(static, node, loop, env)

    def _static_elements(self, static: Static, node: cst.BaseExpression, loop: cst.For,
                         env: Env) -> list[Element] | None:
        container = static.value
        if isinstance(container, torch.Tensor):
            return None
        if isinstance(container, (torch.nn.ModuleDict, dict)):
            return [_static_literal(key) for key in container]
        values = list(container)
        if len(values) > MAX_TRIPS:
            raise self.ctx.error(f"a for loop of more than {MAX_TRIPS} iterations", loop)
        if _is_dict_view(container) and isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            owner = self.flow.evaluate(node.func.value, env)
            if owner is not None:
                return [self._view_element(owner, v, container) for v in values]
        indexable = isinstance(container, (list, tuple, range, str, torch.nn.ModuleList, torch.nn.Sequential))
        out = []
        for i, value in enumerate(values):
            term = self._term(value, subscript_term(static.term, i) if indexable else None)
            if term is None:
                raise self.ctx.error(f"a for loop over a {type(container).__name__} whose items cannot be named",
                                     loop, "iterate over a list, a tuple or a module container")
            out.append(Element(Static(value, term), term))
        return out

    def _view_element(self, owner: Static, value, view) -> Element:
        if _is_items(view):
            key, item = value
            item_term = self._term(item, subscript_term(owner.term, key))
            return _tuple_element((_static_literal(key), Element(Static(item, item_term), item_term)))
        key = next(k for k, v in owner.value.items() if v is value)
        term = self._term(value, subscript_term(owner.term, key))
        return Element(Static(value, term), term)

    def _term(self, value, fallback: cst.BaseExpression | None) -> cst.BaseExpression | None:
        if is_literal(value) and not holds_container(value):
            return literal_term(value)
        path = self.flow.index.term_for(value)
        return fallback if path is None else path

    def _display_elements(self, loop: cst.For, env: Env) -> tuple[list[Element], Block]:
        """A literal list/tuple with dynamic items: evaluate them once, before the loop."""
        reassigned = bound_names(loop.body)
        prologue: Block = []
        elements: list[Element] = []
        for item in loop.iter.elements:
            if isinstance(item, cst.StarredElement):
                raise self.ctx.error("a for loop over a starred sequence", loop)
            static = self.flow.evaluate(item.value, env)
            if static is not None:
                elements.append(Element(static, static.term))
            elif isinstance(item.value, cst.Name) and item.value.value not in reassigned:
                elements.append(Element(None, item.value))
            else:
                temp = self.ctx.namespace.fresh("item")
                prologue.append(self._assign(cst.Name(temp), item.value, loop))
                elements.append(Element(None, cst.Name(temp)))
        return elements, prologue

    def _bounded_rows(self, loop: cst.For, env: Env) -> tuple[list[Element], Block] | None:
        """The rows of a tensor from data whose count has a static bound (see the class note)."""
        bound = row_bound(loop.iter, self._calculus(Calculus, env))
        if bound is None:
            return None
        if bound > MAX_TRIPS:
            raise self.ctx.error(f"a for loop over up to {bound} rows (more than {MAX_TRIPS})", loop)
        if loop.orelse is not None:
            raise self.ctx.error("a for loop with an else clause over rows whose number depends on the input", loop,
                                 "set a flag where the loop breaks and test it after the loop")
        prologue: Block = []
        rows = loop.iter
        if not isinstance(rows, cst.Name) or rows.value in bound_names(loop.body):
            rows = cst.Name(self.ctx.namespace.fresh("rows"))
            prologue.append(self._assign(rows, loop.iter, loop))
        # Note: why the rows are padded. The build runs every branch once on the example to learn its
        # shapes, also the iterations the example's rows do not reach; padded with zero rows up to the
        # bound, each iteration's statements can run. The host runs an iteration only where it exists.
        torch_name = next((name for name, value in self.unit.parsed.globals.items() if value is torch
                           and name not in self.flow.locals), None)
        if torch_name is None:
            raise self.ctx.error("a for loop over rows from data in a module that does not import torch", loop,
                                 "import torch")
        padded = cst.Name(self.ctx.namespace.fresh("padded"))
        prologue.append(self._assign(padded, cst.parse_expression(
            f"{torch_name}.cat([{rows.value}, {rows.value}.new_zeros(({bound}, *{rows.value}.shape[1:]))])"), loop))
        count = cst.parse_expression(f"{rows.value}.shape[0]")
        return [Element(None, subscript_term(padded, i), cst.Comparison(count, [cst.ComparisonTarget(
            cst.GreaterThan(), cst.Integer(str(i)))])) for i in range(bound)], prologue

    def _exists_guard(self, exists: cst.BaseExpression, loop: cst.For) -> cst.BaseStatement:
        negated = cst.UnaryOperation(cst.Not(), exists.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]))
        guard = cst.If(negated, cst.IndentedBlock([cst.SimpleStatementLine([cst.Break()])]))
        return set_location(guard, comment_of(loop))

    # -- binding the loop target -------------------------------------------------------------

    def bind(self, target: cst.BaseExpression, element: Element, loop: cst.For) -> Block:
        if isinstance(target, (cst.Tuple, cst.List)) and isinstance(element.term, cst.Tuple) and len(
            element.term.elements) == len(target.elements):
            lines: Block = []
            parts = element.static.value if element.static is not None else None
            for i, (sub_target, sub_term) in enumerate(zip(target.elements, element.term.elements)):
                sub_static = Static(parts[i], sub_term.value) if parts is not None else None
                lines += self.bind(sub_target.value, Element(sub_static, sub_term.value), loop)
            return lines
        if not isinstance(target, (cst.Name, cst.Tuple, cst.List)):
            raise self.ctx.error("a for loop whose target is not a name or a tuple of names", loop)
        return [self._assign(target, element.term, loop)]

    def _assign(self, target: cst.BaseExpression, value: cst.BaseExpression, loop: cst.For) -> cst.BaseStatement:
        line = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(target)], value)])
        return set_location(line, comment_of(loop))


def _context(bindings: Block) -> str:
    """``i=7, blk=self.blocks[7]``: an iteration's bindings, for its location comments; long terms cut."""
    parts = []
    for line in bindings:
        assign = line.body[0]
        target = cst.Module([]).code_for_node(assign.targets[0].target)
        value = " ".join(cst.Module([]).code_for_node(assign.value).split())
        parts.append(f"{target}={value if len(value) <= 40 else value[:39] + '…'}")
    return ", ".join(parts)


def _static_literal(value) -> Element:
    if not is_literal(value):
        raise TypeError("non-literal key")
    return literal_element(value)


def _tuple_element(items) -> Element:
    items = tuple(items)
    term = cst.Tuple([cst.Element(e.term) for e in items])
    if all(e.static is not None for e in items):
        return Element(Static(tuple(e.static.value for e in items), term), term)
    return Element(None, term)


def _is_dict_view(value) -> bool:
    return type(value).__name__ in ("odict_items", "odict_values", "dict_items", "dict_values")


def _is_items(value) -> bool:
    return type(value).__name__ in ("odict_items", "dict_items")


def _conjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of ``a and b and ...``, left to right (``[test]`` for any other test)."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _conjuncts(test.left) + _conjuncts(test.right)
    return [test]
