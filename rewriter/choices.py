"""Choices made by a value that is not static become ``if`` statements.

A value computed from tensor data can choose on the host: which branch of a
conditional expression runs (``"pos" if x.mean() > 0 else "neg"``), whether
the rest of a chained comparison runs (``lo < x.mean() < hi``), which member of a
container is called (``self.heads[i](x)``, ``self.experts[idx.item()](x)``,
``self.heads[key](x)`` on a ModuleDict or dict, ``getattr(self, f"head{i}")(x)``).
A graph exported on the example would keep the example's choice; as ``if``
statements, each choice is a condition of the HCFG and every outcome is compiled.

Assumes: loops are unrolled (``Unroll``), so the static facts (``StaticFlow``)
say which deciding values are static. Runs before ``Inline`` (a chosen member
whose ``forward`` branches is inlined in its own branch) and constant
propagation (which folds the tests that turn out static).

Guarantees, for each statement: the first choice in evaluation order whose
deciding value is not static, and that reads more than a tensor's metadata
(``dim()``, ``shape``, ``is None``: those stay as they are), is lifted into
statements before it, and the choice replaced by a fresh name:

- ``a if c else b``        → ``if c: t = a`` / ``else: t = b``
- ``lo < m < hi``          → ``t = lo < m`` / ``if t: t = m < hi`` (``m`` computed once)
- ``if a and b:`` (``or``, ``not``; two operands are not static, one decides) → ``t = False`` /
  ``if a: if b: t = True``
  and ``if t:`` (``t`` a Python bool on every path: an operand folded later changes no type)
- ``a and b`` elsewhere (``a`` decides) → ``t = a`` / ``if t: t = b`` (``or``: ``if not t``)
- ``seq[i](args)``         → ``if (i == 0) | (i == -n): t = seq[0](args)`` / ... / ``else: raise IndexError``
- ``table[k](args)``       → ``if k == "a": t = table["a"](args)`` / ... / ``else: raise KeyError(k)``
- ``getattr(m, name)(args)`` → the same over ``m``'s submodules and callable attributes
  whose names fit ``name`` (the literal parts of an f-string), ``else: raise AttributeError``
- ``max(seq, key=f)``/``min`` over a sequence of static length → ``best = seq[0]`` and, per later
  item, ``if f(item) > best_key: best = item`` (the first of equal items wins, as in Python)
- ``sorted(seq, key=f)`` over a sequence of static length → each item's key computed once, in
  order, the positions sorted by them on the host, and the list of the items in that order
- ``max(a, b, ...)``/``min`` (the builtin, two or more items, no keyword) → each item bound once,
  in order, then ``best = a`` and, per later item, ``if item > best: best = item`` (``<`` for
  ``min``: the comparison CPython makes, so ``max(t.max() + 1, n)`` chooses on the host)
- a statement (or an ``if`` test) reading a name that holds one of the literals of a lifted
  conditional expression (``act = "relu" if c else "tanh"`` and copies of ``act``) → one copy
  per literal under ``if act == "relu"``, the literal in place of the name (``getattr(torch,
  act)(h)``, ``F.interpolate(x, mode=mode)`` become static); any other value raises. A result
  that is a static literal written otherwise (``self.base_scale``) is lifted as its literal, so
  the domain keeps it
- ``expert = self.experts[i]``, ``mode = Mode(i)`` (an Enum), ``m = A if c else B`` (members the
  host cannot hold, bound to a name) → ``key = i`` (``bool(c)``); each later statement of the
  same block (or below) that reads the name is switched over the members
- ``table[k]`` not called (``self.scale[key]``) → the same, each branch reading one member;
  a member that is a module must be called where it is chosen (the host holds no modules)

A statement with a call that changes a value in place (``x.add_(1)``, ``outs.append(y)``)
is left as it is: its choice would be made before the change; unless that call is the
statement itself, on a name (``outs.append(a if c else b)``), whose arguments Python evaluates
before the change anyway. The new statements are
rewritten again, so nested choices are lifted too. Choices
that may not run (inside a lambda, a comprehension, the right of ``and``/``or``, a
branch of another conditional expression) are left where they are until their
enclosing choice is lifted. Moving a choice before the statement evaluates it
before the parts of the statement left of it; forward() code between two tensor
computations has no effects that this order could show.
"""

from __future__ import annotations

from typing import Any

import libcst as cst
from dycl.rewriter.choice_domains import Alias, Domains, Substitute, is_literal_syntax
from dycl.rewriter.choice_lowering import Lowering
from dycl.rewriter.choice_members import Member, Members, members
from dycl.rewriter.exits import Block
from dycl.rewriter.flow import Env, Exits, thread
from dycl.rewriter.passes import FunctionUnit, ScopedFlowWalker
from dycl.rewriter.values import is_literal, literal_term
from dycl.rewriter.vocabulary import MUTATING_METHODS
from dycl.rewriter.walk import _child_list, descendants

#: tests of a tensor's metadata (fixed by the example's shapes, or kept by shape guards), not of its data
_METADATA = frozenset({"dim", "ndim", "ndimension", "shape", "size", "numel", "nelement", "dtype", "device",
                       "is_floating_point", "is_contiguous", "is_sparse", "layout",
                       "is_complex", "is_cuda", "requires_grad", "training", "isinstance", "hasattr", "callable",
                       "len", "type", "is_tracing", "is_scripting"})


class Choices(ScopedFlowWalker):
    name = "choices"
    description = "data-dependent choices (a ? b : c, chained comparisons, container[i](x)) become if statements"

    def __init__(self, unit: FunctionUnit) -> None:
        super().__init__(unit)
        self.domains = Domains()

    def run(self, body: Block) -> Block:
        if not any(_may_choose(n) for stmt in body for n in descendants(stmt)):
            return body  # no choice to make (nor a key lambda, a max/min call): the static facts need not be threaded
        return super().run(body)

    def replaced(self, stmts: Block, env: Env) -> tuple[Block, Exits]:
        """Walk the statements that replace one statement, in the same block."""
        return thread(stmts, env, self.statement)

    def statement(self, stmt: cst.BaseStatement, env: Env) -> tuple[Block, Exits]:
        if isinstance(stmt, cst.If):
            lifted = self.by_domain(stmt.test, stmt) or self.truth(stmt.test, env, stmt) or self.lift(
                stmt.test, env, stmt)
            if lifted is not None:
                before, test = lifted
                return self.replaced([*before, stmt.with_changes(test=test)], env)
            return self.branch(stmt, env)
        if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
            aliased = self.alias(stmt, env)
            if aliased is not None:
                return self.replaced(aliased, env)
            name = self.domains.read_in(stmt.body[0])
            if name is not None:
                return self.replaced(self.per_value(name, lambda term: stmt.visit(Substitute(name, term)), stmt),
                                     env)
            lifted = self.lift(stmt.body[0], env, stmt)
            if lifted is not None:
                before, small = lifted
                return self.replaced([*before, stmt.with_changes(body=[small])], env)
        self._refuse_key_lambda(stmt)
        self.domains.after(stmt, self.scopes[-1])
        return [stmt], self.flow.step(stmt, env)

    def _refuse_key_lambda(self, stmt: cst.BaseStatement) -> None:
        """A ``key=lambda`` that ``RejectUnsupported`` let through for ``max``/``min`` and that no
        choice lowered (its sequence has no static length, or its call is not builtin max): refused."""
        body = stmt.body if isinstance(stmt, cst.SimpleStatementLine) else [getattr(stmt, "test", None)]
        if any(isinstance(n, cst.Lambda) for small in body if small is not None for n in descendants(small)):
            raise self.ctx.error("a lambda", stmt, "use a def at module level or an nn.Module (max/min/sorted("
                                 "seq, key=lambda t: ...) compiles over a sequence of static length)")

    def by_domain(self, test: cst.BaseExpression, stmt: cst.If) -> tuple[Block, cst.BaseExpression] | None:
        """``if`` on a name with a domain: its test computed once per value the name may hold."""
        name = self.domains.read_in(test)
        if name is None or _is_value_test(test):
            return None
        lowering = Lowering(self.ctx.namespace, stmt)
        result = lowering.fresh("test")
        return self.per_value(name, lambda term: lowering.line(result, test.visit(Substitute(name, term))),
                              stmt), cst.Name(result)

    def truth(self, test: cst.BaseExpression, env: Env, stmt: cst.If) -> tuple[Block, cst.BaseExpression] | None:
        """``if a and b:`` (``or``, under any number of ``not``) where an operand decides: its truth
        in a Python bool computed by nested ``if``s (``Lowering.truth``), the test reading it."""
        negations = 0
        while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            test, negations = test.expression, negations + 1
        if not isinstance(test, cst.BooleanOperation) or any(_mutates(n) for n in descendants(test)):
            return None
        operands = _operands(test)
        dynamic = [operand for operand in operands if self.flow.evaluate(operand, env) is None]
        if len(dynamic) < 2 or not any(self.decides(operand, env) for operand in dynamic):
            return None  # one operand left once the static ones fold: constant propagation tests it alone
        result, statements = Lowering(self.ctx.namespace, stmt).truth(test)
        read: cst.BaseExpression = cst.Name(result)
        for _ in range(negations):
            read = cst.UnaryOperation(cst.Not(), read)
        return statements, read

    def per_value(self, name: str, make, stmt: cst.BaseStatement) -> Block:
        """``make(term)`` under the test of each possibility of ``name`` (``Domains.options``)."""
        alias = self.domains.aliases.get(name)
        if name in self.domains.lost or (alias is not None and alias.scope not in self.scopes):
            raise self.ctx.error(f"`{name}`, a member chosen by data in a branch, used after the branch", stmt,
                                 "call the chosen member inside the branch that chooses it")
        options, missing = self.domains.options(name)
        return Lowering(self.ctx.namespace, stmt).per_option(options, missing, make)

    def alias(self, stmt: cst.SimpleStatementLine, env: Env) -> Block | None:
        """``name = table[k]``/``getattr(m, name)``/``Mode(k)`` choosing a member the host cannot hold
        by data: ``key = k`` only, and ``name`` an alias for the member the key picks (``Domains``)."""
        small = stmt.body[0]
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target,
                                                                                       cst.Name)):
            return None
        found = members(small.value, self.flow, env) if isinstance(small.value, (cst.Subscript, cst.Call)) else (
            self.unheld_conditional(small.value, env))
        if found is None or not found.unheld or not self.decides(found.key, env):
            return None
        lowering = Lowering(self.ctx.namespace, stmt)
        key = lowering.fresh("key")
        self.domains.alias(small.targets[0].target.value, Alias(found, key, self.scopes[-1]))
        return [lowering.line(key, found.key)]

    def unheld_conditional(self, node: cst.BaseExpression, env: Env) -> Members | None:
        """``Mode.FAST if c else Mode.SLOW`` (static values the host cannot hold): the members of
        ``bool(c)``."""
        if not isinstance(node, cst.IfExp):
            return None
        values = [self.flow.evaluate(branch, env) for branch in (node.body, node.orelse)]
        if any(value is None or is_literal(value.value) for value in values):
            return None
        key = cst.Call(cst.Name("bool"), [cst.Arg(node.test)])
        return Members(key, (Member(True, node.body), Member(False, node.orelse)), "RuntimeError", None, True)

    def lift(self, node: cst.CSTNode, env: Env, stmt: cst.BaseStatement
             ) -> tuple[Block, Any] | None:
        """The statements that make the first dynamic choice in ``node``, and ``node`` reading its result."""
        below = list(descendants(node))
        last = _changes_after_its_arguments(node)
        if not any(_may_choose(n) for n in below) or any(_mutates(n) for n in below if n is not last):
            return None  # nothing to evaluate; or moving a test before `x.add_(1)` could see another x
        callees = {id(n.func) for n in below if isinstance(n, cst.Call)}
        for current in _eager_order(node):
            if id(current) in callees:
                continue  # ``table[k](x)``: the call is the choice, the member is not bound to a name
            made = self.choice(current, env, stmt)
            if made is not None:
                result, statements = made
                return statements, node.deep_replace(current, cst.Name(result))
        return None

    def choice(self, node: cst.CSTNode, env: Env, stmt: cst.BaseStatement) -> tuple[str, Block] | None:
        lowering = Lowering(self.ctx.namespace, stmt)
        if isinstance(node, cst.IfExp) and self.decides(node.test, env):
            literals = self.literals(node, env)
            # each branch written as its literal (``self.easy_steps`` as ``1``): the domain follows what it binds
            result, statements = lowering.conditional(node if literals is None else self.as_literals(node, env))
            self.domains.record(result, literals)
            return result, statements
        if isinstance(node, cst.Comparison) and len(node.comparisons) > 1 and self.decides(node, env):
            return lowering.chain(node)
        if isinstance(node, cst.BooleanOperation) and self.decides(node.left, env) and self.flow.evaluate(
                node.right, env) is None:  # a static right operand: constant propagation's (a test's truth)
            return lowering.value(node)
        extreme = self.extreme_of(node, env) if isinstance(node, cst.Call) else None
        if extreme is not None and self.decides(node, env):
            positional = [a.value for a in node.args if a.keyword is None]
            if len(positional) > 1:  # ``max(a, b)``: its arguments are the items
                return lowering.extreme_of_items(positional, extreme == "max")
            key = next(a.value for a in node.args if a.keyword is not None)
            return lowering.extreme(positional[0], key, self.flow.static_length(positional[0], env), extreme == "max")
        ordering = self.sorting_of(node, env) if isinstance(node, cst.Call) else None
        if ordering is not None and self.decides(node, env):
            sequence, key, reverse = ordering
            return lowering.sorted_by_key(sequence, key, self.flow.static_length(sequence, env), reverse)
        if isinstance(node, (cst.Call, cst.Subscript)):
            found = members(node.func if isinstance(node, cst.Call) else node, self.flow, env)
            if found is not None and self.decides(found.key, env):
                return lowering.switch(node, found)
        return None

    def extreme_of(self, call: cst.Call, env: Env) -> str | None:
        """``"max"``/``"min"`` for the builtin's ``max(seq, key=f)`` over a sequence of static
        length or ``max(a, b, ...)`` (two or more items, no keyword), else None."""
        function = self.flow.evaluate(call.func, env)
        keys = [a.keyword.value for a in call.args if a.keyword is not None]
        positional = [a for a in call.args if a.keyword is None]
        if function is None or function.value not in (max, min) or any(a.star for a in positional):
            return None
        over_items = not keys and len(positional) > 1
        over_sequence = keys == ["key"] and len(positional) == 1 and self.flow.static_length(positional[0].value, env)
        return function.value.__name__ if over_items or over_sequence else None

    def sorting_of(self, call: cst.Call, env: Env
                   ) -> tuple[cst.BaseExpression, cst.BaseExpression, cst.BaseExpression | None] | None:
        """``(seq, key, reverse)`` for the builtin's ``sorted(seq, key=f)`` (``reverse=`` static) over
        a sequence of static length whose items are not static (the host's own ``sorted(range(n),
        ...)`` that ``Lowering.sorted_by_key`` writes is not sorted again), else None."""
        function = self.flow.evaluate(call.func, env)
        keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        positional = [a for a in call.args if a.keyword is None]
        if (function is None or function.value is not sorted or len(positional) != 1 or positional[0].star
                or "key" not in keywords or not set(keywords) <= {"key", "reverse"}):
            return None
        sequence, reverse = positional[0].value, keywords.get("reverse")
        if (not self.flow.static_length(sequence, env) or self.flow.evaluate(sequence, env) is not None
                or reverse is not None and self.flow.evaluate(reverse, env) is None):
            return None
        return sequence, keywords["key"], reverse

    def literals(self, node: cst.BaseExpression, env: Env) -> tuple[Any, ...] | None:
        """The literals a (nested) conditional expression of literals may give, else None."""
        if isinstance(node, cst.IfExp):
            body, orelse = self.literals(node.body, env), self.literals(node.orelse, env)
            return body + orelse if body is not None and orelse is not None else None
        value = self.flow.evaluate(node, env)
        return (value.value,) if value is not None and is_literal(value.value) else None

    def as_literals(self, node: cst.BaseExpression, env: Env) -> cst.BaseExpression:
        """A conditional expression of static literals (``literals`` holds) with each result
        written as its literal."""
        if isinstance(node, cst.IfExp):
            return node.with_changes(body=self.as_literals(node.body, env), orelse=self.as_literals(node.orelse, env))
        return node if is_literal_syntax(node) else literal_term(self.flow.evaluate(node, env).value)

    def decides(self, node: cst.BaseExpression, env: Env) -> bool:
        """Whether ``node`` is not static and reads more than metadata."""
        if self.flow.evaluate(node, env) is not None:
            return False
        words = {n.value for n in descendants(node) if isinstance(n, cst.Name)}
        return not (words & _METADATA) and not any(isinstance(n, cst.Comparison) and any(
            isinstance(c.operator, (cst.Is, cst.IsNot)) for c in n.comparisons) for n in descendants(node))


def _is_value_test(test: cst.BaseExpression) -> bool:
    """``name == literal``: already the test of which value a name holds (``Choices.per_value``)."""
    return isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name) and len(test.comparisons) == 1 and (
        isinstance(test.comparisons[0].operator, cst.Equal))


def _may_choose(node: cst.CSTNode) -> bool:
    """A syntactic filter: nodes of the kinds ``Choices.choice`` may rewrite."""
    if isinstance(node, (cst.IfExp, cst.BooleanOperation)):
        return True
    if isinstance(node, cst.Comparison):
        return len(node.comparisons) > 1
    if isinstance(node, cst.Subscript):
        return len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index) and not isinstance(
            node.slice[0].slice.value, (cst.BaseNumber, cst.BaseString, cst.UnaryOperation))
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in (
        "getattr", "max", "min", "sorted")


def _operands(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of a tree of ``and``/``or`` (parentheses and ``not`` looked through)."""
    while isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        node = node.expression
    if isinstance(node, cst.BooleanOperation):
        return _operands(node.left) + _operands(node.right)
    return [node]


def _mutates(node: cst.CSTNode) -> bool:
    """A call that may change a value in place (``x.add_(1)``, ``outs.append(y)``)."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
        return False
    method = node.func.attr.value
    return method in MUTATING_METHODS or (method.endswith("_") and not method.endswith("__"))


def _changes_after_its_arguments(node: cst.CSTNode) -> cst.Call | None:
    """The statement's own call where it changes a plain name's value in place (``outs.append(a if c
    else b)``, ``self.cache.append(...)``): Python evaluates its arguments, and makes their choices,
    before the change, so they may be lifted before the statement."""
    call = node.value if isinstance(node, cst.Expr) else None
    if not (isinstance(call, cst.Call) and _mutates(call)):
        return None
    receiver = call.func.value
    while isinstance(receiver, cst.Attribute):
        receiver = receiver.value
    return call if isinstance(receiver, cst.Name) else None


def _eager_order(node: cst.CSTNode):
    """The sub-expressions of ``node`` that always run, innermost first in evaluation order."""
    if isinstance(node, (cst.Lambda, cst.BaseComp)):
        return
    if isinstance(node, cst.BooleanOperation):
        yield from _eager_order(node.left)
    elif isinstance(node, cst.IfExp):
        yield from _eager_order(node.test)
    else:
        for child in _child_list(node):
            yield from _eager_order(child)
    yield node


__all__ = ["Choices"]
