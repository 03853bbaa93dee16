"""What is statically known at each program point: the environment and its transfer.

``Env`` maps a local name to a ``Static`` (its compile-time value) or a
``ListLength`` (a dynamic list of known length) or a ``DictKeys`` (a dynamic dict
of known keys: ``kwargs = {"mask": m}``); a name absent from the env is
dynamic. ``StaticFlow`` pushes an env through statements the way Python would
execute them, following only the taken branch of an ``if`` whose test is static
and joining both branches of one that is dynamic. Unroll, inline and constant
propagation all walk with it, so they agree on what is static.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import libcst as cst
from dycl.rewriter.aliases import Group, tracks
from dycl.rewriter.containers import ContainerEffects, Position
from dycl.rewriter.context import RewriteContext
from dycl.rewriter.precedence import binary
from dycl.rewriter.static_eval import StaticEvaluator
from dycl.rewriter.values import (
    CONTAINERS,
    TOKENED,
    DictKeys,
    ListLength,
    ModuleIndex,
    Static,
    holds_container,
    is_literal,
    literal_term,
    subscript_term,
)
from dycl.rewriter.walk import bound_names, descendants, target_names

Fact = Static | ListLength | DictKeys


def _same(a: Fact, b: Fact) -> bool:
    if isinstance(a, TOKENED) or isinstance(b, TOKENED):
        return a == b
    if a.value is b.value:
        return True
    return (is_literal(a.value) and type(a.value) is type(b.value) and a.value == b.value
            and not holds_container(a.value))


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

    def first_alias(self, name: str) -> str:
        """The first-bound name that holds the same container as ``name`` (``name``
        itself if none): rewritten code names each container one way, so later
        stages that treat a list as a value per name stay right."""
        fact = self.facts.get(name)
        if isinstance(fact, TOKENED):
            return next(n for n, f in self.facts.items() if isinstance(f, TOKENED) and f.token is fact.token)
        if isinstance(fact, Static) and isinstance(fact.value, CONTAINERS):
            return next(n for n, f in self.facts.items() if isinstance(f, Static) and f.value is fact.value)
        return name


def join(envs: Iterable[Env | None]) -> Env | None:
    """Facts that hold on every incoming path (None: no path reaches here)."""
    live = [e for e in envs if e is not None]
    if not live:
        return None
    first, rest = live[0], live[1:]
    facts = {name: fact for name, fact in first.facts.items()
             if all(name in e.facts and _same(fact, e.facts[name]) for e in rest)}
    joined = Env(facts, set().union(*(e.virtual for e in live)))
    if rest:
        # A name dynamic after the join may still refer to a container on some path.
        escaped = Group()
        for env in live:
            for name, fact in env.facts.items():
                kept = joined.facts.get(name)
                if (kept is None or not _same(kept, fact)) and tracks(fact):
                    escaped.add(Group.of(fact))
        escaped.drop(joined)
        for name, fact in first.facts.items():
            if name not in joined.facts and _one_list_of_length(name, live):
                joined.bind(name, ListLength(fact.length))  # ``outs = [a]`` on both paths
    return joined


def _one_list_of_length(name: str, envs: list[Env]) -> bool:
    """Whether ``name`` holds, on every path, a list of one same length that no other name holds."""
    facts = [env.facts.get(name) for env in envs]
    if not all(isinstance(f, ListLength) and f.length == facts[0].length for f in facts):
        return False
    return all(sum(1 for other in env.facts.values() if isinstance(other, ListLength) and other.token is f.token) == 1
               for env, f in zip(envs, facts))


@dataclass
class Exits:
    """How control leaves a block: falling through, by ``break``, by ``continue``."""

    fall: Env | None
    breaks: list[Env] = field(default_factory=list)
    continues: list[Env] = field(default_factory=list)

    def then(self, step: Exits) -> Exits:
        """These exits followed by ``step``, the exits of what runs after falling through."""
        return Exits(step.fall, self.breaks + step.breaks, self.continues + step.continues)


Statements = list[cst.BaseStatement]
#: One statement's rewrite under the facts before it: its replacement and how control leaves it.
StatementRewrite = Callable[[cst.BaseStatement, "Env"], tuple[Statements, Exits]]


def thread(stmts: Iterable[cst.BaseStatement], env: Env | None,
           statement: StatementRewrite) -> tuple[Statements, Exits]:
    """Run ``statement`` over ``stmts`` in order, each under the facts that fall
    through the ones before it; stops where no path falls through. The one
    block loop of every flow-aware pass (``passes.FlowWalker``) and of ``StaticFlow``."""
    out: Statements = []
    exits = Exits(env)
    for stmt in stmts:
        if exits.fall is None:
            break
        new, step = statement(stmt, exits.fall)
        out.extend(new)
        exits = exits.then(step)
    return out, exits


_NOTHING = object()


class _FlowScope:
    def __init__(self, flow: StaticFlow, env: Env) -> None:
        self.flow = flow
        self.env = env

    def lookup(self, name: str) -> Fact | None:
        fact = self.env.get(name)
        if fact is not None:
            return fact
        globals_ = self.flow.ctx.globals
        if name in self.flow.locals or name in self.flow.ctx.namespace.generated and name not in globals_.introduced:
            return None
        return globals_.resolve(name, self.flow.fn_globals)


class StaticFlow:
    """Transfer functions for one function body (``locals``: the local names of
    its source, to which every name the namespace generates is added;
    ``fn_globals``: the globals its source was written against; ``index``: the
    paths of the modules it can reach, from its receiver)."""

    def __init__(self, ctx: RewriteContext, locals_: set[str], fn_globals: dict[str, Any],
                 index: ModuleIndex) -> None:
        self.ctx = ctx
        self.locals = locals_
        self.fn_globals = fn_globals
        self.index = index

    def evaluator(self, env: Env) -> StaticEvaluator:
        return StaticEvaluator(_FlowScope(self, env), self.index, self.ctx.fresh, self.ctx.state,
                               self.ctx.config_reads)

    def evaluate(self, node: cst.BaseExpression, env: Env) -> Static | None:
        return self.evaluator(env).evaluate(node)

    # -- blocks --------------------------------------------------------------------------

    def run_block(self, stmts: Iterable[cst.BaseStatement], env: Env | None) -> Exits:
        """How control leaves ``stmts`` entered with ``env`` (which is not modified)."""
        return thread(stmts, env.copy() if env is not None else None, self._transfer)[1]

    def _transfer(self, stmt: cst.BaseStatement, env: Env) -> tuple[Statements, Exits]:
        return [], self.step(stmt, env)

    def step(self, stmt: cst.BaseStatement, env: Env) -> Exits:
        """Effect of one statement on ``env`` (which it may modify)."""
        if type(stmt) is cst.SimpleStatementLine:
            exits = Exits(env)
            for small in stmt.body:
                if exits.fall is None:
                    break
                exits = self._small(small, exits.fall, exits, stmt)
            return exits
        if isinstance(stmt, cst.If):
            return self._if(stmt, env)
        if isinstance(stmt, cst.With):
            return self.run_block(stmt.body.body, env)
        if isinstance(stmt, (cst.For, cst.While)):
            for name in bound_names(stmt):
                env.kill(name)
            for node in descendants(stmt):  # a loop left as it is may change any container it names
                if isinstance(node, cst.Name) and tracks(env.get(node.value)):
                    Group.of(env.get(node.value)).drop(env)
            return Exits(env)
        return Exits(env)

    def step_small(self, small: cst.BaseSmallStatement, env: Env, line: cst.CSTNode | None = None) -> Exits:
        """Effect of one small statement (``a = b``, ``return x``, ...) on ``env``
        (``line``: the statement line it belongs to, for error locations)."""
        return self._small(small, env, Exits(env), line)

    def _if(self, stmt: cst.If, env: Env) -> Exits:
        self.refuse_changes_in_test(stmt.test, env, stmt)
        test = self.evaluate(stmt.test, env)
        orelse = else_body(stmt)
        if test is not None:
            return self.run_block(stmt.body.body if test.value else orelse, env)
        taken = self.run_block(stmt.body.body, env.copy())
        other = self.run_block(orelse, env.copy())
        return Exits(join([taken.fall, other.fall]), taken.breaks + other.breaks,
                     taken.continues + other.continues)

    # -- simple statements -----------------------------------------------------------------

    def _small(self, node: cst.BaseSmallStatement, env: Env, exits: Exits,
               anchor: cst.CSTNode | None = None) -> Exits:
        kind = type(node)
        if kind is cst.Return and node.value is not None:
            ContainerEffects(self, env.copy(), node, anchor).visit(node.value, Position.READ)
        if kind is cst.Return or kind is cst.Raise:
            return Exits(None, exits.breaks, exits.continues)
        if kind is cst.Break:
            return Exits(None, exits.breaks + [env], exits.continues)
        if kind is cst.Continue:
            return Exits(None, exits.breaks, exits.continues + [env])
        effects = ContainerEffects(self, env, node, anchor)
        if kind is cst.Assign:
            self._assign([t.target for t in node.targets], node.value, env, effects)
        elif isinstance(node, cst.AnnAssign) and node.value is not None:
            self._assign([node.target], node.value, env, effects)
        elif isinstance(node, cst.AugAssign):
            self._aug_assign(node, env, effects)
        elif isinstance(node, cst.Expr):
            effects.visit(node.value, Position.READ)
        elif isinstance(node, cst.Assert):
            effects.visit(node.test, Position.READ)
        elif isinstance(node, cst.Del):
            self._delete(node.target, env, effects)
        return Exits(env, exits.breaks, exits.continues)

    def _assign(self, targets: list[cst.BaseExpression], value_node: cst.BaseExpression, env: Env,
                effects: ContainerEffects) -> None:
        value = self.evaluate(value_node, env)
        single_store = len(targets) == 1 and isinstance(targets[0], (cst.Subscript, cst.Attribute))
        if all(isinstance(t, cst.Name) for t in targets):
            effects.visit(value_node, Position.ALIAS)
            returned = effects.results.get(id(value_node), _NOTHING)
            if value is None and is_literal(returned) and not holds_container(returned):
                value = Static(returned, literal_term(returned))  # ``shift = cfg.pop("shift")``
        elif not single_store:
            effects.visit(value_node, Position.ESCAPE)
        for target in targets:
            self.bind_target(target, value, value_node, env, effects, visit_value=single_store)

    def bind_target(self, target: cst.BaseExpression, value: Static | None,
                    value_node: cst.BaseExpression | None, env: Env,
                    effects: ContainerEffects | None = None, visit_value: bool = False) -> None:
        """Bind ``target`` to ``value`` (computed by ``value_node``, whose effects
        are applied unless ``visit_value``: then ``target`` is an item or
        attribute that keeps the value)."""
        if isinstance(target, cst.Name):
            if value is not None:
                if holds_container(value.value):  # the name is the run-time alias of the container
                    value = Static(value.value, cst.Name(target.value))
                env.bind(target.value, value)
            elif isinstance(value_node, cst.Name) and isinstance(env.get(value_node.value), TOKENED):
                env.bind(target.value, env.get(value_node.value))
            elif isinstance(value_node, cst.Dict) and self.display_dict(value_node, env) is not None:
                env.bind(target.value, self.display_dict(value_node, env))
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
                self.bind_target(element, part_value, part_node, env, effects)
            return
        if isinstance(target, (cst.Subscript, cst.Attribute)):
            effects = effects or ContainerEffects(self, env, target, None)
            effects.store(target, value, value_node if visit_value else None)
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

    def _aug_assign(self, node: cst.AugAssign, env: Env, effects: ContainerEffects) -> None:
        if effects.in_place(node):
            return
        if not isinstance(node.target, cst.Name):
            effects.item_in_place(node)
            return
        name = node.target.value
        operator = getattr(cst, type(node.operator).__name__.replace("Assign", ""))()
        combined = binary(node.target, operator, node.value)
        value = self.evaluate(combined, env)
        effects.visit(node.value, Position.ALIAS if value is not None else Position.ESCAPE)
        if value is not None:
            if holds_container(value.value):
                value = Static(value.value, cst.Name(name))
            env.bind(name, value)
        else:
            env.kill(name)

    def _delete(self, target: cst.BaseExpression, env: Env, effects: ContainerEffects) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._delete(element.value, env, effects)
        elif isinstance(target, cst.Subscript):
            effects.delete(target)
        elif isinstance(target, cst.Attribute):
            effects.visit(target.value, Position.READ)
        else:
            for name in target_names(target):
                env.kill(name)

    def display_keys(self, node: cst.Dict, env: Env) -> tuple | None:
        """The keys of a dict display, in order, when every key is a static Python value; None otherwise."""
        fact = self.display_dict(node, env)
        return None if fact is None else fact.keys

    def display_dict(self, node: cst.Dict, env: Env) -> DictKeys | None:
        """A new ``DictKeys`` for a dict display whose every key is a static Python value
        (``{"mask": m, **kwargs}`` with ``kwargs`` a static dict or a ``DictKeys``), knowing
        the values that are static and hold no container; None otherwise."""
        values: dict[Any, Static | None] = {}
        for element in node.elements:
            if isinstance(element, cst.StarredDictElement):
                fact = env.get(element.value.value) if isinstance(element.value, cst.Name) else None
                static = self.evaluate(element.value, env) if fact is None else None
                if isinstance(fact, DictKeys):
                    values.update({key: fact.value_of(key) for key in fact.keys})
                elif static is not None and type(static.value) is dict:
                    values.update({key: _plain_static(value) for key, value in static.value.items()})
                else:
                    return None
                continue
            key = self.evaluate(element.key, env)
            if key is None or not isinstance(key.value, _KEY_TYPES):
                return None
            value = self.evaluate(element.value, env)
            values[key.value] = value if value is not None and not holds_container(value.value) else None
        return DictKeys(tuple(values), known=tuple((k, v) for k, v in values.items() if v is not None))

    def static_length(self, node: cst.BaseExpression, env: Env) -> int | None:
        """The length of ``node``'s value when it is known (a display, a ``ListLength``, a static sequence)."""
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

    def refuse_changes_in_test(self, test: cst.BaseExpression, env: Env, stmt: cst.CSTNode) -> None:
        """An ``if``/``while`` test must not change a container: the passes would
        see the change on one path only."""
        probe = env.copy()
        ContainerEffects(self, probe, test, stmt).visit(test, Position.READ)
        if probe.facts != env.facts:
            raise self.ctx.error("a condition that changes a container", stmt,
                                 "change the container on a line of its own before the `if`")


_KEY_TYPES = (str, int, float, bool, bytes, type(None))


def _plain_static(value: Any) -> Static | None:
    return Static(value, literal_term(value)) if is_literal(value) and not holds_container(value) else None


def else_body(stmt: cst.If) -> list[cst.BaseStatement]:
    """The statements of an ``if``'s else branch (an ``elif`` counts as one ``if``)."""
    if stmt.orelse is None:
        return []
    if isinstance(stmt.orelse, cst.If):
        return [stmt.orelse]
    return list(stmt.orelse.body.body)
