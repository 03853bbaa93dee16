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
- ``seq[i](args)``         → ``if (i == 0) | (i == -n): t = seq[0](args)`` / ... / ``else: raise IndexError``
- ``table[k](args)``       → ``if k == "a": t = table["a"](args)`` / ... / ``else: raise KeyError(k)``
- ``getattr(m, name)(args)`` → the same over ``m``'s submodules and callable attributes
  whose names fit ``name`` (the literal parts of an f-string), ``else: raise AttributeError``
- ``max(seq, key=f)``/``min`` over a sequence of static length → ``best = seq[0]`` and, per later
  item, ``if f(item) > best_key: best = item`` (the first of equal items wins, as in Python)
- a statement (or an ``if`` test) reading a name that holds one of the literals of a lifted
  conditional expression (``act = "relu" if c else "tanh"`` and copies of ``act``) → one copy
  per literal under ``if act == "relu"``, the literal in place of the name (``getattr(torch,
  act)(h)``, ``F.interpolate(x, mode=mode)`` become static); any other value raises
- ``expert = self.experts[i]`` (a callable member, bound to a name) → ``key = i``; each later
  statement of the same block (or below) that reads ``expert`` is switched over the members
- ``table[k]`` not called (``self.scale[key]``) → the same, each branch reading one member;
  a member that is a module must be called where it is chosen (the host holds no modules)

The new statements are rewritten again, so nested choices are lifted too. Choices
that may not run (inside a lambda, a comprehension, the right of ``and``/``or``, a
branch of another conditional expression) are left where they are until their
enclosing choice is lifted. Moving a choice before the statement evaluates it
before the parts of the statement left of it; forward() code between two tensor
computations has no effects that this order could show.
"""

from __future__ import annotations

from typing import Any

import libcst as cst
from dycl.rewriter.choice_members import Alias, Domains, Members, Substitute, members
from dycl.rewriter.exits import Block, make_block
from dycl.rewriter.flow import Env, Exits, thread
from dycl.rewriter.locations import comment_of, set_location
from dycl.rewriter.passes import FlowWalker, FunctionUnit
from dycl.rewriter.values import is_literal
from dycl.rewriter.walk import bound_names, descendants

#: tests of a tensor's metadata (fixed by the example's shapes, or kept by shape guards), not of its data
_METADATA = frozenset({"dim", "ndim", "ndimension", "shape", "size", "dtype", "device", "is_floating_point",
                       "is_complex", "is_cuda", "requires_grad", "training", "isinstance", "hasattr", "callable",
                       "len", "type", "is_tracing", "is_scripting"})


class Choices(FlowWalker):
    name = "choices"
    description = "data-dependent choices (a ? b : c, chained comparisons, container[i](x)) become if statements"

    def __init__(self, unit: FunctionUnit) -> None:
        super().__init__(unit)
        self.domains = Domains()
        self.scopes: list[int] = []  # the blocks being walked, innermost last (``Domains`` aliases)
        self.walked = 0

    def block(self, stmts: Block, env: Env | None) -> tuple[Block, Exits]:
        self.walked += 1
        self.scopes.append(self.walked)
        try:
            return super().block(stmts, env)
        finally:
            self.scopes.pop()

    def replaced(self, stmts: Block, env: Env) -> tuple[Block, Exits]:
        """Walk the statements that replace one statement, in the same block."""
        return thread(stmts, env, self.statement)

    def statement(self, stmt: cst.BaseStatement, env: Env) -> tuple[Block, Exits]:
        if isinstance(stmt, cst.If):
            lifted = self.by_domain(stmt.test, stmt) or self.lift(stmt.test, env, stmt)
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
        self.domains.after(stmt, bound_names(stmt), self.scopes[-1])
        return [stmt], self.flow.step(stmt, env)

    def by_domain(self, test: cst.BaseExpression, stmt: cst.If) -> tuple[Block, cst.BaseExpression] | None:
        """``if`` on a name with a domain: its test computed once per value the name may hold."""
        name = self.domains.read_in(test)
        if name is None or _is_value_test(test):
            return None
        result = self.fresh("test")
        return self.per_value(name, lambda term: self.line(result, test.visit(Substitute(name, term)), stmt),
                              stmt), cst.Name(result)

    def per_value(self, name: str, make, stmt: cst.BaseStatement) -> Block:
        """``make(term)`` under the test of each possibility of ``name`` (``Domains.options``)."""
        alias = self.domains.aliases.get(name)
        if name in self.domains.lost or (alias is not None and alias.scope not in self.scopes):
            raise self.ctx.error(f"`{name}`, a member chosen by data in a branch, used after the branch", stmt,
                                 "call the chosen member inside the branch that chooses it")
        options, missing = self.domains.options(name)
        orelse: Block = [set_location(cst.SimpleStatementLine([missing]), comment_of(stmt))]
        for test, term in reversed(options):
            orelse = [_at(cst.If(test, make_block([make(term)]), orelse=cst.Else(make_block(orelse))), stmt)]
        return orelse

    def alias(self, stmt: cst.SimpleStatementLine, env: Env) -> Block | None:
        """``name = table[k]``/``getattr(m, name)`` choosing a member by data: ``key = k`` only, and
        ``name`` an alias for the member the key picks (``Domains``)."""
        small = stmt.body[0]
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target,
                                                                                       cst.Name)):
            return None
        found = members(small.value, self.flow, env) if isinstance(small.value, (cst.Subscript, cst.Call)) else None
        if found is None or not found.callable or not self.decides(found.key, env):
            return None
        key = self.fresh("key")
        if not self.domains.alias(small.targets[0].target.value, Alias(found, key, self.scopes[-1]), self.scopes):
            return None
        return [self.line(key, found.key, stmt)]

    def lift(self, node: cst.CSTNode, env: Env, stmt: cst.BaseStatement
             ) -> tuple[Block, Any] | None:
        """The statements that make the first dynamic choice in ``node``, and ``node`` reading its result."""
        callees = {id(n.func) for n in descendants(node) if isinstance(n, cst.Call)}
        for current in _eager_order(node):
            if id(current) in callees:
                continue  # ``table[k](x)``: the call is the choice, the member is not bound to a name
            made = self.choice(current, env, stmt)
            if made is not None:
                result, statements = made
                return statements, node.deep_replace(current, cst.Name(result))
        return None

    def choice(self, node: cst.CSTNode, env: Env, stmt: cst.BaseStatement) -> tuple[str, Block] | None:
        if isinstance(node, cst.IfExp) and self.decides(node.test, env):
            result = self.fresh("choice")
            self.domains.record(result, self.literals(node, env))
            return result, [_at(cst.If(node.test, make_block([self.line(result, node.body, stmt)]),
                                       orelse=cst.Else(make_block([self.line(result, node.orelse, stmt)]))), stmt)]
        if isinstance(node, cst.Comparison) and len(node.comparisons) > 1 and self.decides(node, env):
            return self.chain(node, stmt)
        if isinstance(node, cst.Call) and self.extreme_of(node, env) is not None and self.decides(node, env):
            return self.extreme(node, env, stmt)
        if isinstance(node, (cst.Call, cst.Subscript)):
            found = members(node.func if isinstance(node, cst.Call) else node, self.flow, env)
            if found is not None and self.decides(found.key, env):
                return self.switch(node, found, stmt)
        return None

    def chain(self, node: cst.Comparison, stmt: cst.BaseStatement) -> tuple[str, Block]:
        """``a < b < c`` as Python runs it: ``b`` once, ``b < c`` only where ``a < b`` holds."""
        result = self.fresh("chain")
        before: Block = []
        left, tests = node.left, []
        for position, target in enumerate(node.comparisons):
            right = target.comparator
            if position < len(node.comparisons) - 1 and not isinstance(right, (cst.Name, cst.BaseNumber)):
                middle = self.fresh("operand")
                before.append(self.line(middle, right, stmt))
                right = cst.Name(middle)
            tests.append(cst.Comparison(left, [target.with_changes(comparator=right)]))
            left = right
        body: Block = []
        for test in reversed(tests[1:]):
            body = [self.line(result, test, stmt), *([_at(cst.If(cst.Name(result), make_block(body)), stmt)]
                                                     if body else [])]
        return result, [*before, self.line(result, tests[0], stmt), _at(cst.If(cst.Name(result), make_block(body)),
                                                                       stmt)]

    def switch(self, chooser: cst.Call | cst.Subscript, found: Members, stmt: cst.BaseStatement
               ) -> tuple[str, Block]:
        """One branch per member: the member (or the call of it) in place of the chosen one."""
        result = self.fresh("chosen")
        before: Block = []
        key = found.key
        if not isinstance(key, cst.Name):
            name = self.fresh("key")
            before.append(self.line(name, key, stmt))
            key = cst.Name(name)
        orelse: Block = [set_location(cst.SimpleStatementLine([found.raise_missing(key)]), comment_of(stmt))]
        for member in reversed(found.members):
            value = chooser.with_changes(func=member.term) if isinstance(chooser, cst.Call) else member.term
            branch = [self.line(result, value, stmt)]
            orelse = [_at(cst.If(found.test(key, member), make_block(branch), orelse=cst.Else(make_block(orelse))),
                          stmt)]
        return result, [*before, *orelse]

    def extreme_of(self, call: cst.Call, env: Env) -> str | None:
        """``"max"``/``"min"`` for ``max(seq, key=f)`` over a sequence of static length, else None."""
        function = self.flow.evaluate(call.func, env)
        keys = [a.keyword.value for a in call.args if a.keyword is not None]
        positional = [a for a in call.args if a.keyword is None]
        if function is None or function.value not in (max, min) or keys != ["key"] or len(positional) != 1 or (
                positional[0].star or not self.flow.static_length(positional[0].value, env)):
            return None
        return function.value.__name__

    def extreme(self, call: cst.Call, env: Env, stmt: cst.BaseStatement) -> tuple[str, Block]:
        """``max(seq, key=f)`` as Python runs it: the first item whose key no later item beats."""
        sequence = next(a.value for a in call.args if a.keyword is None)
        key = next(a.value for a in call.args if a.keyword is not None)
        beats = cst.GreaterThan() if self.extreme_of(call, env) == "max" else cst.LessThan()
        items, best, best_key = self.fresh("items"), self.fresh("best"), self.fresh("best_key")
        item = lambda i: cst.Subscript(cst.Name(items), [cst.SubscriptElement(cst.Index(cst.Integer(str(i))))])  # noqa: E731
        statements: Block = [self.line(items, sequence, stmt), self.line(best, item(0), stmt),
                             self.line(best_key, cst.Call(key, [cst.Arg(cst.Name(best))]), stmt)]
        for i in range(1, self.flow.static_length(sequence, env)):
            score = self.fresh("score")
            statements.append(self.line(score, cst.Call(key, [cst.Arg(item(i))]), stmt))
            test = cst.Comparison(cst.Name(score), [cst.ComparisonTarget(beats, cst.Name(best_key))])
            statements.append(_at(cst.If(test, make_block([self.line(best, item(i), stmt),
                                                           self.line(best_key, cst.Name(score), stmt)])), stmt))
        return best, statements

    def literals(self, node: cst.BaseExpression, env: Env) -> tuple[Any, ...] | None:
        """The literals a (nested) conditional expression of literals may give, else None."""
        if isinstance(node, cst.IfExp):
            body, orelse = self.literals(node.body, env), self.literals(node.orelse, env)
            return body + orelse if body is not None and orelse is not None else None
        value = self.flow.evaluate(node, env)
        return (value.value,) if value is not None and is_literal(value.value) else None

    def decides(self, node: cst.BaseExpression, env: Env) -> bool:
        """Whether ``node`` is not static and reads more than metadata."""
        if self.flow.evaluate(node, env) is not None:
            return False
        words = {n.value for n in descendants(node) if isinstance(n, cst.Name)}
        return not (words & _METADATA) and not any(isinstance(n, cst.Comparison) and any(
            isinstance(c.operator, (cst.Is, cst.IsNot)) for c in n.comparisons) for n in descendants(node))

    def fresh(self, stem: str) -> str:
        return self.ctx.namespace.fresh(stem)

    @staticmethod
    def line(name: str, value: cst.BaseExpression, like: cst.BaseStatement) -> cst.SimpleStatementLine:
        return set_location(cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], value)]),
                            comment_of(like))


def _is_value_test(test: cst.BaseExpression) -> bool:
    """``name == literal``: already the test of which value a name holds (``Choices.per_value``)."""
    return isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name) and len(test.comparisons) == 1 and (
        isinstance(test.comparisons[0].operator, cst.Equal))


def _at(stmt: cst.If, like: cst.BaseStatement) -> cst.If:
    return set_location(stmt, comment_of(like))


def _eager_order(node: cst.CSTNode):
    """The sub-expressions of ``node`` that always run, innermost first in evaluation order."""
    if isinstance(node, (cst.Lambda, cst.BaseComp)):
        return
    if isinstance(node, cst.BooleanOperation):
        yield from _eager_order(node.left)
    elif isinstance(node, cst.IfExp):
        yield from _eager_order(node.test)
    else:
        for child in node.children:
            yield from _eager_order(child)
    yield node


__all__ = ["Choices"]
