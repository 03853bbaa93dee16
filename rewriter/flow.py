"""What is statically known at each program point: the environment and its transfer.

``Env`` maps a local name to a ``Static`` (its compile-time value) or a
``ListLength`` (a dynamic list of known length); a name absent from the env is
dynamic. ``StaticFlow`` pushes an env through statements the way Python would
execute them, following only the taken branch of an ``if`` whose test is static
and joining both branches of one that is dynamic. Unroll, inline and constant
propagation all walk with it, so they agree on what is static.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from rewriter.context import RewriteContext
from rewriter.static_eval import StaticEvaluator
from rewriter.values import ListLength, Static, is_literal, literal_term, subscript_term
from rewriter.walk import bound_names, small_statement_targets, target_names

Fact = Static | ListLength


def _same(a: Fact, b: Fact) -> bool:
    if isinstance(a, ListLength) or isinstance(b, ListLength):
        return a == b
    if a.value is b.value:
        return True
    return (is_literal(a.value) and type(a.value) is type(b.value) and a.value == b.value
            and not isinstance(a.value, list))


class Env:
    """The facts known at one program point (copy before forking).

    ``virtual`` names are static names whose assignment was removed by
    constant propagation: no variable holds their value at run time.
    """

    __slots__ = ("facts", "virtual")

    def __init__(self, facts: dict[str, Fact] | None = None, virtual: set[str] | None = None) -> None:
        self.facts: dict[str, Fact] = dict(facts or {})
        self.virtual: set[str] = set(virtual or ())

    def copy(self) -> Env:
        return Env(self.facts, self.virtual)

    def bind(self, name: str, fact: Fact) -> None:
        self.facts[name] = fact

    def kill(self, name: str) -> None:
        self.facts.pop(name, None)

    def get(self, name: str) -> Fact | None:
        return self.facts.get(name)


def join(envs: Iterable[Env | None]) -> Env | None:
    """Facts that hold on every incoming path (None: no path reaches here)."""
    live = [e for e in envs if e is not None]
    if not live:
        return None
    first, rest = live[0], live[1:]
    facts = {name: fact for name, fact in first.facts.items()
             if all(name in e.facts and _same(fact, e.facts[name]) for e in rest)}
    return Env(facts, set().union(*(e.virtual for e in live)))


@dataclass
class Exits:
    """How control leaves a block: falling through, by ``break``, by ``continue``."""

    fall: Env | None
    breaks: list[Env] = field(default_factory=list)
    continues: list[Env] = field(default_factory=list)


def local_names(node: cst.CSTNode) -> set[str]:
    """Names a function (or any node) binds: parameters and assignment targets."""
    return bound_names(node)


def assigned_names(node: cst.CSTNode) -> set[str]:
    """Names bound anywhere inside ``node`` (a statement or block)."""
    return bound_names(node)


class _FlowScope:
    def __init__(self, flow: StaticFlow, env: Env) -> None:
        self.flow = flow
        self.env = env

    def lookup(self, name: str) -> Fact | None:
        fact = self.env.get(name)
        if fact is not None:
            return fact
        if name in self.flow.locals or name in self.flow.ctx.namespace.generated:
            return None
        return self.flow.ctx.globals.resolve(name, self.flow.fn_globals)


_LIST_GROWERS = {"append": 1, "insert": 1}


class StaticFlow:
    """Transfer functions for one function body (``locals``: the local names of
    its source, to which every name the namespace generates is added;
    ``fn_globals``: the globals its source was written against)."""

    def __init__(self, ctx: RewriteContext, locals_: set[str], fn_globals: dict[str, Any]) -> None:
        self.ctx = ctx
        self.locals = locals_
        self.fn_globals = fn_globals

    def evaluator(self, env: Env) -> StaticEvaluator:
        return StaticEvaluator(_FlowScope(self, env), self.ctx.index)

    def evaluate(self, node: cst.BaseExpression, env: Env) -> Static | None:
        return self.evaluator(env).evaluate(node)

    # -- blocks --------------------------------------------------------------------------

    def run_block(self, stmts: Iterable[cst.BaseStatement], env: Env | None) -> Exits:
        exits = Exits(env.copy() if env is not None else None)
        for stmt in stmts:
            if exits.fall is None:
                break
            step = self.step(stmt, exits.fall)
            exits = Exits(step.fall, exits.breaks + step.breaks, exits.continues + step.continues)
        return exits

    def step(self, stmt: cst.BaseStatement, env: Env) -> Exits:
        """Effect of one statement on ``env`` (which it may modify)."""
        if type(stmt) is cst.SimpleStatementLine:
            exits = Exits(env)
            for small in stmt.body:
                if exits.fall is None:
                    break
                exits = self._small(small, exits.fall, exits)
            return exits
        if isinstance(stmt, cst.If):
            return self._if(stmt, env)
        if isinstance(stmt, cst.With):
            return self.run_block(stmt.body.body, env)
        if isinstance(stmt, (cst.For, cst.While)):
            for name in assigned_names(stmt):
                env.kill(name)
            return Exits(env)
        return Exits(env)

    def step_small(self, small: cst.BaseSmallStatement, env: Env) -> Exits:
        """Effect of one small statement (``a = b``, ``return x``, ...) on ``env``."""
        return self._small(small, env, Exits(env))

    def _if(self, stmt: cst.If, env: Env) -> Exits:
        test = self.evaluate(stmt.test, env)
        orelse = else_body(stmt)
        if test is not None:
            return self.run_block(stmt.body.body if test.value else orelse, env)
        taken = self.run_block(stmt.body.body, env.copy())
        other = self.run_block(orelse, env.copy())
        return Exits(join([taken.fall, other.fall]), taken.breaks + other.breaks,
                     taken.continues + other.continues)

    # -- simple statements -----------------------------------------------------------------

    def _small(self, node: cst.BaseSmallStatement, env: Env, exits: Exits) -> Exits:
        kind = type(node)
        if kind is cst.Return or kind is cst.Raise:
            return Exits(None, exits.breaks, exits.continues)
        if kind is cst.Break:
            return Exits(None, exits.breaks + [env], exits.continues)
        if kind is cst.Continue:
            return Exits(None, exits.breaks, exits.continues + [env])
        if kind is cst.Assign:
            value = self.evaluate(node.value, env)
            self._forget_escaping_lists(node.value, env)
            for target in node.targets:
                self.bind_target(target.target, value, node.value, env)
        elif isinstance(node, cst.AnnAssign) and node.value is not None:
            self.bind_target(node.target, self.evaluate(node.value, env), node.value, env)
        elif isinstance(node, cst.AugAssign):
            self._aug_assign(node, env)
        elif isinstance(node, cst.Expr):
            self._expression_statement(node.value, env)
        elif isinstance(node, cst.Del):
            for name in small_statement_targets(node):
                env.kill(name)
        return Exits(env, exits.breaks, exits.continues)

    def bind_target(self, target: cst.BaseExpression, value: Static | None,
                    value_node: cst.BaseExpression | None, env: Env) -> None:
        if isinstance(target, cst.Name):
            if value is not None:
                env.bind(target.value, value)
            elif isinstance(value_node, cst.List) and not any(
                isinstance(e, cst.StarredElement) for e in value_node.elements
            ):
                env.bind(target.value, ListLength(len(value_node.elements)))
            else:
                env.kill(target.value)
            return
        if isinstance(target, (cst.Tuple, cst.List)):
            elements = [e.value for e in target.elements]
            if any(isinstance(e, cst.StarredElement) for e in target.elements):
                value = None
            parts = self._unpack(value, value_node, len(elements), env)
            for element, (part_value, part_node) in zip(elements, parts):
                self.bind_target(element, part_value, part_node, env)
            return
        for name in target_names(target):
            env.kill(name)

    def _unpack(self, value: Static | None, value_node: cst.BaseExpression | None, arity: int,
                env: Env) -> list[tuple[Static | None, cst.BaseExpression | None]]:
        if value is not None and isinstance(value.value, (tuple, list)) and len(value.value) == arity:
            return [(Static(v, literal_term(v) if is_literal(v) else subscript_term(value.term, i)), None)
                    for i, v in enumerate(value.value)]
        if isinstance(value_node, (cst.Tuple, cst.List)) and len(value_node.elements) == arity and not any(
            isinstance(e, cst.StarredElement) for e in value_node.elements
        ):
            return [(self.evaluate(e.value, env), e.value) for e in value_node.elements]
        return [(None, None)] * arity

    def _aug_assign(self, node: cst.AugAssign, env: Env) -> None:
        if not isinstance(node.target, cst.Name):
            return
        name = node.target.value
        fact = env.get(name)
        if isinstance(fact, ListLength) and isinstance(node.operator, cst.AddAssign):
            added = self._static_length(node.value, env)
            if added is not None:
                env.bind(name, ListLength(fact.length + added))
                return
        operator = getattr(cst, type(node.operator).__name__.replace("Assign", ""))()
        combined = cst.BinaryOperation(node.target, operator, node.value)
        value = self.evaluate(combined, env)
        if value is not None and not isinstance(value.value, list):
            env.bind(name, value)
        else:
            env.kill(name)

    def _static_length(self, node: cst.BaseExpression, env: Env) -> int | None:
        if isinstance(node, (cst.List, cst.Tuple)) and not any(
            isinstance(e, cst.StarredElement) for e in node.elements
        ):
            return len(node.elements)
        evaluator = self.evaluator(env)
        length = evaluator.list_length(node)
        if length is not None:
            return length
        value = evaluator.evaluate(node)
        if value is not None and isinstance(value.value, (tuple, list, range)):
            return len(value.value)
        return None

    def _expression_statement(self, value: cst.BaseExpression, env: Env) -> None:
        if (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
                and isinstance(value.func.value, cst.Name)):
            name = value.func.value.value
            method = value.func.attr.value
            fact = env.get(name)
            length = None
            if isinstance(fact, ListLength):
                length = fact.length
            elif isinstance(fact, Static) and isinstance(fact.value, list):
                length = len(fact.value)
            if length is not None:
                self._forget_escaping_lists(value, env, keep=name)
                if method in _LIST_GROWERS:
                    env.bind(name, ListLength(length + 1))
                elif method == "extend" and value.args:
                    added = self._static_length(value.args[0].value, env)
                    env.bind(name, ListLength(length + added)) if added is not None else env.kill(name)
                elif method == "pop" and length > 0:
                    env.bind(name, ListLength(length - 1))
                elif method == "clear":
                    env.bind(name, ListLength(0))
                elif method in ("index", "count", "copy"):
                    pass
                else:
                    env.kill(name)
                return
        self._forget_escaping_lists(value, env)

    def _is_pure_call(self, call: cst.Call, env: Env) -> bool:
        """Calls known not to mutate a list argument: builtins and torch functions."""
        func = self.evaluate(call.func, env)
        if func is None:
            return False
        module = getattr(func.value, "__module__", None) or ""
        return module in ("builtins", "math") or module.startswith("torch")

    def _forget_escaping_lists(self, node: cst.BaseExpression, env: Env, keep: str | None = None) -> None:
        """A list passed to a call may be mutated by it: forget what we knew."""
        if any(_is_list_fact(f) for f in env.facts.values()):
            node.visit(_ListArguments(self, env, keep))


def _is_list_fact(fact: Fact | None) -> bool:
    return isinstance(fact, ListLength) or (isinstance(fact, Static) and isinstance(fact.value, list))


class _ListArguments(cst.CSTVisitor):
    """Forgets lists passed to calls that may mutate them."""

    def __init__(self, flow: StaticFlow, env: Env, keep: str | None) -> None:
        super().__init__()
        self.flow = flow
        self.env = env
        self.keep = keep

    def visit_Call(self, call: cst.Call) -> None:
        for arg in call.args:
            if not isinstance(arg.value, cst.Name) or arg.value.value == self.keep:
                continue
            if _is_list_fact(self.env.get(arg.value.value)) and not self.flow._is_pure_call(call, self.env):
                self.env.kill(arg.value.value)


def else_body(stmt: cst.If) -> list[cst.BaseStatement]:
    """The statements of an ``if``'s else branch (an ``elif`` counts as one ``if``)."""
    if stmt.orelse is None:
        return []
    if isinstance(stmt.orelse, cst.If):
        return [stmt.orelse]
    return list(stmt.orelse.body.body)
