"""Pass: constant propagation and folding of everything that does not depend on the inputs."""

from __future__ import annotations

import functools
from collections.abc import Callable

import libcst as cst
from dycl.rewriter.context import RewriteContext
from dycl.rewriter.dead_containers import drop_dead_containers
from dycl.rewriter.exits import Block, rebuild_if
from dycl.rewriter.flow import Env, Exits, StaticFlow, else_body, join
from dycl.rewriter.locations import comment_of, set_location
from dycl.rewriter.passes import FlowWalker, FunctionUnit
from dycl.rewriter.precedence import binary
from dycl.rewriter.substitute import replace_names
from dycl.rewriter.values import ListLength, Static, canonical_term, is_literal, literal_term
from dycl.rewriter.walk import COMPREHENSIONS, is_a, map_children, read_names, small_statement_targets

_LEAVES = frozenset({cst.Integer, cst.Float, cst.SimpleString})
_SCOPES = frozenset({cst.Lambda, *COMPREHENSIONS})
_COMPREHENSION_DISPLAYS = frozenset({cst.ListComp, cst.SetComp, cst.DictComp})
# values whose truth Python decides without running model code (a tensor's would be data)
_PLAIN_TRUTH = (bool, int, float, str, type(None), tuple, list, dict)


class FoldExpression:
    """Replaces static names by their terms and static sub-expressions by literals
    or model paths; simplifies ``a if <static> else b`` and ``<static> and x``.

    Assumes: ``env`` describes the program point of the expression.
    Guarantees: every static sub-expression whose value is a literal or a
    submodule/parameter is written as that literal or path; attribute and
    keyword names are untouched; inside lambdas and comprehensions only the free
    names of static values are replaced by their terms (their own names shadow), so
    an assignment the pass drops leaves no read of its name behind.
    """

    def __init__(self, ctx: RewriteContext, flow: StaticFlow, env: Env) -> None:
        self.ctx = ctx
        self.env = env
        self.index = flow.index
        self.evaluator = flow.evaluator(env)

    def __call__(self, node: cst.CSTNode) -> cst.CSTNode:
        kind = type(node)
        if kind in _LEAVES:
            return node
        if kind in _SCOPES:
            if kind in _COMPREHENSION_DISPLAYS:  # a new container of literals each time: its display is the same
                static = self.evaluator.evaluate(node)
                if static is not None and is_literal(static.value):
                    return literal_term(static.value)
            return replace_names(node, self._static_term)
        if kind is cst.Name:
            fact = self.evaluator.scope.lookup(node.value)
            if isinstance(fact, Static) and fact.substitutable:
                return fact.term
            alias = self.env.first_alias(node.value)
            return node if alias == node.value else cst.Name(alias)
        if kind is cst.IfExp:
            test = self.evaluator.evaluate(node.test)
            if test is not None:
                return self(node.body if test.value else node.orelse)
            folded = map_children(node, self)
            return folded.with_changes(test=truth_equivalent(folded.test, self.evaluator.evaluate))
        if kind is cst.BooleanOperation:
            left = self.evaluator.evaluate(node.left)
            if left is not None:
                short_circuits = (not left.value) if type(node.operator) is cst.And else bool(left.value)
                return self(node.left if short_circuits else node.right)
        if is_a(node, (cst.BaseExpression,)):
            static = self.evaluator.evaluate(node)
            if static is not None and static.substitutable:
                if not is_literal(static.value) and self._is_plain_path(node):
                    return node
                term = canonical_term(static.value, self.index)
                if term is not None:
                    return term
        return map_children(node, self)

    def _static_term(self, name: str) -> cst.BaseExpression | None:
        fact = self.evaluator.scope.lookup(name)
        return fact.term if isinstance(fact, Static) and fact.substitutable else None

    def _is_plain_path(self, node: cst.BaseExpression) -> bool:
        """``self.a.b[2]['k']``: a path from a name that is not a static local
        (so it is already closed, and folding would only rebuild it)."""
        while True:
            if isinstance(node, cst.Attribute):
                node = node.value
            elif isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(
                    node.slice[0].slice, cst.Index) and isinstance(
                    node.slice[0].slice.value, (cst.Integer, cst.SimpleString)):
                node = node.value
            elif isinstance(node, cst.Name):
                fact = self.evaluator.scope.lookup(node.value)
                return isinstance(fact, Static) and isinstance(fact.term, cst.Name) and (
                    fact.term.value == node.value)
            else:
                return False


class ConstantPropagation(FlowWalker):
    """Substitutes and folds static values, drops ``if``s with a static test and
    assignments of static values.

    Assumes: loop-free code (after ``Unroll`` and ``Inline``).
    Guarantees: no ``if`` has a static test; a name bound to a static value
    is replaced at its uses by the value's term and its assignment removed;
    where such a name becomes dynamic at a join (``cnt += 1`` in one branch
    only) it is assigned explicitly at the end of each branch where it was
    still static, if anything reads it later.
    """

    name = "constprop"
    description = "substitute and fold static values; drop ifs with static tests"

    def __init__(self, unit: FunctionUnit) -> None:
        super().__init__(unit)
        self._materialized: dict[int, str] = {}
        # id(fact) -> (fact, the location of the statement that made it), so that a value
        # written back after an ``if`` carries its own line, not the ``if``'s
        self._origins: dict[int, tuple[Static, cst.Comment | None]] = {}

    def run(self, body: Block) -> Block:
        out = super().run(body)
        return drop_dead_containers(self._drop_unread_materializations(out))

    def fold(self, node: cst.CSTNode, env: Env) -> cst.CSTNode:
        return FoldExpression(self.ctx, self.flow, env)(node)

    def statement(self, stmt: cst.BaseStatement, env: Env) -> tuple[Block, Exits]:
        if isinstance(stmt, cst.If):
            return self.branch(stmt, env)
        if isinstance(stmt, cst.SimpleStatementLine):
            return self._line(stmt, env)
        raise AssertionError(f"unexpected statement after unrolling: {type(stmt).__name__}")

    def _line(self, stmt: cst.SimpleStatementLine, env: Env) -> tuple[Block, Exits]:
        kept: list[cst.BaseSmallStatement] = []
        exits = Exits(env)
        droppable = None  # a static value kept only as a container's run-time name: dropped if unread
        for small in stmt.body:
            if exits.fall is None:
                break
            here = exits.fall
            new_small = self._small(small, here)
            if new_small is not None and len(stmt.body) == 1:
                droppable = _static_binding(small, functools.partial(self.flow.evaluate, env=here))
            if new_small is not None:
                kept.append(new_small)
            result_dropped = isinstance(new_small, cst.Expr) and isinstance(small, cst.Assign)
            exits = self.flow.step_small(small if result_dropped else new_small or small, here, stmt)
            if exits.fall is not None:
                written = small_statement_targets(small)
                if new_small is None or result_dropped:
                    exits.fall.virtual |= written
                    for name in written:
                        fact = exits.fall.facts.get(name)
                        if isinstance(fact, Static):
                            self._origins[id(fact)] = (fact, comment_of(stmt))
                else:
                    exits.fall.virtual -= written
        if not kept:
            return [], exits
        line = stmt.with_changes(body=kept)
        if droppable is not None:
            self._materialized[id(line)] = droppable
        return [line], exits

    def _small(self, small: cst.BaseSmallStatement, env: Env) -> cst.BaseSmallStatement | None:
        """The folded statement, or None when it only binds static values."""
        if isinstance(small, cst.Assign):
            value = self.flow.evaluate(small.value, env)
            if value is not None and value.substitutable and all(
                _binds_names_only(t.target) for t in small.targets
            ):
                return None
            if value is None and _is_method_call(small.value) and all(
                    isinstance(t.target, cst.Name) for t in small.targets):
                probe = self.flow.step_small(small, env.copy()).fall
                results = [probe.get(t.target.value) if probe is not None else None for t in small.targets]
                if all(isinstance(r, Static) and r.substitutable for r in results):
                    return cst.Expr(self.fold(small.value, env))  # ``v = cfg.pop(k)`` with a static result
            targets = [t.with_changes(target=self._fold_target(t.target, env)) for t in small.targets]
            if isinstance(small.value, _COMPREHENSIONS) and value is not None and is_literal(value.value):
                # a new container built at compile time (a comprehension over static values): its display
                return small.with_changes(targets=targets, value=literal_term(value.value))
            return small.with_changes(targets=targets, value=self.fold(small.value, env))
        if isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name):
            fact = env.get(small.target.value)
            if type(small.operator) is cst.AddAssign and (isinstance(fact, ListLength) or (
                    isinstance(fact, Static) and type(fact.value) is list)):
                # the same change (list.__iadd__ is extend), without rebinding the name
                extend = cst.Attribute(self.fold(small.target, env), cst.Name("extend"))
                return cst.Expr(cst.Call(extend, [cst.Arg(self.fold(small.value, env))]))
            if isinstance(fact, Static) and fact.substitutable:
                operator = getattr(cst, type(small.operator).__name__.replace("Assign", ""))()
                combined = binary(small.target, operator, small.value)
                if self.flow.evaluate(combined, env) is not None:
                    return None
                return cst.Assign([cst.AssignTarget(small.target)], self.fold(combined, env))
            return small.with_changes(value=self.fold(small.value, env))
        if isinstance(small, cst.AugAssign):
            return small.with_changes(target=self._fold_target(small.target, env), value=self.fold(small.value, env))
        if isinstance(small, cst.AnnAssign) and small.value is not None:
            return self._small(cst.Assign([cst.AssignTarget(small.target)], small.value), env)
        if isinstance(small, cst.Del):
            fact = env.get(small.target.value) if isinstance(small.target, cst.Name) else None
            if isinstance(fact, Static) and fact.substitutable:
                return None
            return small.with_changes(target=self._fold_target(small.target, env))
        if isinstance(small, (cst.Expr, cst.Return, cst.Assert, cst.Raise)):
            return self.fold(small, env)
        return small

    def _fold_target(self, target: cst.BaseExpression, env: Env) -> cst.BaseExpression:
        """A write target with its index expressions folded: the place written
        is kept (``acc[i] += 2`` becomes ``acc[0] += 2``, never ``1 += 2``)."""
        if isinstance(target, cst.Subscript):
            return target.with_changes(value=self._fold_place(target.value, env),
                                       slice=[self.fold(element, env) for element in target.slice])
        if isinstance(target, cst.Attribute):
            return target.with_changes(value=self._fold_place(target.value, env))
        if isinstance(target, (cst.Tuple, cst.List)):
            return target.with_changes(elements=[e.with_changes(value=self._fold_target(e.value, env))
                                                 for e in target.elements])
        if isinstance(target, cst.StarredElement):
            return target.with_changes(value=self._fold_target(target.value, env))
        if isinstance(target, cst.Name):
            return target
        return self.fold(target, env)

    def _fold_place(self, node: cst.BaseExpression, env: Env) -> cst.BaseExpression:
        """The object an item or attribute write goes into: a name is substituted
        like any read, a subscript or attribute keeps its place."""
        if isinstance(node, cst.Name):
            return self.fold(node, env)
        return self._fold_target(node, env)

    def branch(self, stmt: cst.If, env: Env) -> tuple[Block, Exits]:
        test = self.flow.evaluate(stmt.test, env)
        if test is not None:
            return self.block(list(stmt.body.body) if test.value else else_body(stmt), env)
        folded_test = truth_equivalent(self.fold(stmt.test, env), lambda node: self.flow.evaluate(node, env))
        body, then_exits = self.block(list(stmt.body.body), env.copy())
        orelse, else_exits = self.block(else_body(stmt), env.copy())
        joined = join([then_exits.fall, else_exits.fall])
        if joined is not None:
            body += self._materialize(then_exits.fall, joined, stmt)
            orelse += self._materialize(else_exits.fall, joined, stmt)
        exits = Exits(joined, then_exits.breaks + else_exits.breaks, then_exits.continues + else_exits.continues)
        return [rebuild_if(stmt.with_changes(test=folded_test), body, orelse)], exits

    def _materialize(self, branch: Env | None, joined: Env, stmt: cst.If) -> Block:
        """Assignments for names static in ``branch`` but not after the join."""
        if branch is None:
            return []
        lines: Block = []
        for name, fact in branch.facts.items():
            if isinstance(fact, Static) and name in branch.virtual and name not in joined.facts:
                assign = cst.Assign([cst.AssignTarget(cst.Name(name))], fact.term)
                origin = self._origins.get(id(fact))
                comment = origin[1] if origin is not None and origin[0] is fact else comment_of(stmt)
                line = set_location(cst.SimpleStatementLine([assign]), comment)
                self._materialized[id(line)] = name
                lines.append(line)
        return lines

    def _drop_unread_materializations(self, body: Block) -> Block:
        if not self._materialized:
            return body
        read = _read_names(body)
        drop = {i for i, name in self._materialized.items() if name not in read}
        if not drop:
            return body

        class Drop(cst.CSTTransformer):
            def leave_SimpleStatementLine(self, original, updated):
                return cst.RemoveFromParent() if id(original) in drop else updated

            def leave_IndentedBlock(self, original, updated):
                if not updated.body:
                    return updated.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])
                return updated

        module = cst.Module(body=body).visit(Drop())
        return list(module.body)


_COMPREHENSIONS = (cst.ListComp, cst.DictComp, cst.SetComp)


def _static_binding(small: cst.BaseSmallStatement,
                    evaluate: Callable[[cst.BaseExpression], Static | None]) -> str | None:
    """The name ``small`` binds when it is ``name = <static value>`` (kept because the value holds
    a container): evaluating it calls nothing the evaluator does not fold, so the line may go
    where nothing reads the name."""
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name)):
        return None
    return small.targets[0].target.value if evaluate(small.value) is not None else None


def _is_method_call(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)


def _binds_names_only(target: cst.BaseExpression) -> bool:
    if isinstance(target, cst.Name):
        return True
    if isinstance(target, (cst.Tuple, cst.List)):
        return all(_binds_names_only(e.value) for e in target.elements)
    return False


def _read_names(body: Block) -> set[str]:
    """Names that are read somewhere (assignment targets do not count)."""
    names: set[str] = set()
    for stmt in body:
        names |= read_names(stmt)
    return names


def truth_equivalent(test: cst.BaseExpression, static: Callable[[cst.BaseExpression], Static | None]
                     ) -> cst.BaseExpression:
    """``test`` without the operands that cannot change its truth: in ``if x and <true>:``
    or ``if x or <false>:`` only ``x``'s truth decides, so the test is ``x`` (which the
    HCFG turns into a condition, where ``x and True`` would ask ``bool()`` of a tensor
    inside a graph). Operands are rewritten inside ``and``/``or``/``not`` only, each into
    one of the same truth, so the whole keeps its truth and evaluates what it evaluated."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return test.with_changes(expression=truth_equivalent(test.expression, static))
    if not isinstance(test, cst.BooleanOperation):
        return test
    left, right = truth_equivalent(test.left, static), truth_equivalent(test.right, static)
    known = static(right)
    if known is not None and isinstance(known.value, _PLAIN_TRUTH) and (
            bool(known.value) is isinstance(test.operator, cst.And)):
        return left
    return test.with_changes(left=left, right=right)
