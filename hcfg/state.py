"""Execution states used to explore every path of a rewritten function.

Exploration runs the rewritten function on the example input but takes *both*
branches of every ``if``; at a join the states of the incoming branches are
kept side by side unless they have the same ``signature`` (same types, list
lengths, tensor shapes and dtypes — values do not count), so the number of
states stays at the number of structurally different ways to reach a point.

A ``PathState`` is one such way: the namespace the statements run in and, when
some input dims are symbolic, its symbolic mirror (``hcfg.symbolic``) — two
layers of one typed record, forked and merged together.
"""

from __future__ import annotations

import copy
import dataclasses
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import libcst as cst
import torch
from dycl.hcfg.path_lengths import path_fixed_lengths
from dycl.hcfg.symbolic import SymbolicScalar, SymbolicTensor
from dycl.hcfg.type_tests import TypeTestEvaluator, type_test_outcomes
from dycl.rewriter.walk import descendants, target_names

State = dict[str, Any]


def signature(value: Any) -> Any:
    """What compilation depends on: types, structure, shapes and dtypes, not values."""
    if isinstance(value, torch.Tensor):
        return ("tensor", value.dtype, tuple(value.shape))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(signature(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, signature(v)) for k, v in value.items()))
    if isinstance(value, (bool, int, float, complex)):
        return type(value).__name__
    if value is None or isinstance(value, str):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # a record of its fields (hcfg.ports)
        return (type(value), tuple(signature(getattr(value, f.name)) for f in dataclasses.fields(value)))
    return ("object", id(value))


def symbolic_signature(value: Any) -> Any:
    """Like ``signature`` for symbolic values: shapes and numbers from shapes as printed expressions.

    The mirror holds ``SymbolicTensor``s (``hcfg.symbolic``): two states whose tensors have one
    shape on the example but not in general (``x[:1]`` and ``x`` at a batch of 1) must not be
    merged, or the sub-DNNs after the join are compiled for the survivor's static dim only while
    the host lets the other path's sizes through."""
    if isinstance(value, SymbolicTensor):
        return ("tensor", value.dtype, tuple(str(size) for size in value.shape))
    if isinstance(value, SymbolicScalar):
        return ("number", str(value.expr))
    if isinstance(value, torch.Tensor):
        return ("tensor", value.dtype, tuple(str(size) for size in value.shape))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(symbolic_signature(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, symbolic_signature(v)) for k, v in value.items()))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # a record of its fields (hcfg.ports)
        return (type(value), tuple(symbolic_signature(getattr(value, f.name)) for f in dataclasses.fields(value)))
    if isinstance(value, (torch.SymInt, torch.SymBool, torch.SymFloat)):
        return ("sym", str(value))
    return type(value).__name__


def _copy_containers(namespace: State) -> State:
    """``namespace`` with each list and dict copied once, also those inside lists, dicts and
    tuples (a dict of lists appended to on one path only): names that share a container
    (``opts = cfg``) still share the copy, so an update through one is seen through the other."""
    copies: dict[int, Any] = {}

    def copied(value: Any) -> Any:
        if isinstance(value, tuple) and not hasattr(value, "_fields"):  # holds lists the paths append to
            items = [copied(item) for item in value]
            return value if all(a is b for a, b in zip(items, value)) else type(value)(items)
        if not isinstance(value, (list, dict)):
            return value
        if id(value) not in copies:
            new = copies[id(value)] = copy.copy(value)
            if isinstance(new, list):
                new[:] = [copied(item) for item in new]
            else:  # nested: a dict of lists (``collected["hidden"].append(h)`` on one path only)
                for key, item in list(new.items()):
                    if isinstance(item, (list, dict, tuple)):
                        new[key] = copied(item)
        return copies[id(value)]

    return {name: copied(value) for name, value in namespace.items()}


@dataclass
class PathState:
    """One explored way to reach a program point: the namespace the statements run in
    (concrete values) and, when some input dims are symbolic, its symbolic mirror
    (``hcfg.symbolic``: the same names bound to symbolic shapes and numbers)."""

    concrete: State
    symbolic: State | None = None

    def fork(self) -> PathState:
        """A copy whose lists can be appended to without touching this one (in either layer)."""
        return PathState(_copy_containers(self.concrete),
                         None if self.symbolic is None else _copy_containers(self.symbolic))

    def signature(self, names: frozenset[str]) -> tuple:
        """The signature of ``names``, and of their symbolic mirrors when there are: two
        states with equal example shapes but different symbolic dims are kept apart."""
        concrete = tuple(sorted((name, signature(self.concrete[name])) for name in names if name in self.concrete))
        if self.symbolic is None:
            return concrete
        mirror = self.symbolic
        return concrete + tuple(sorted((name, symbolic_signature(mirror[name])) for name in names if name in mirror))


def merge(states: list[PathState], names: frozenset[str]) -> list[PathState]:
    """``states`` without duplicates by signature over ``names`` (first one wins)."""
    seen: set[tuple] = set()
    kept = []
    for state in states:
        key = state.signature(names)
        if key not in seen:
            seen.add(key)
            kept.append(state)
    return kept


class PathFlags:
    """Python booleans that are exact in every explored state.

    A local name that is only ever assigned the literal ``True`` or ``False``
    (the rewriter's ``returned``/``stopped`` flags, a user's ``found = True``)
    holds, in an explored state, the value it has on the path that state
    followed. So a test ``if flag:`` or ``if not flag:`` sends each state only
    into the branch it takes — the other branch is not a path the program can
    take from there, and running it could fail on values that only exist on
    the other side. States whose flags differ are not merged while a test of
    the flag is still ahead (counted: each test is visited once, in order).
    A type test (``isinstance(out, tuple)``, ``h is None``) routes the states the same way
    (``hcfg.type_tests``): the types a state holds are the ones its calls have.
    """

    def __init__(self, statements: Iterable[cst.CSTNode], tests: Iterable[cst.BaseExpression],
                 parameters: Iterable[str]) -> None:
        literal, other = set(), set(parameters)
        statements = list(statements)
        for statement in statements:
            for node in descendants(statement):
                if isinstance(node, cst.Assign):
                    names = [t.target.value for t in node.targets if isinstance(t.target, cst.Name)]
                    if (len(names) == len(node.targets) and isinstance(node.value, cst.Name)
                            and node.value.value in ("True", "False")):
                        literal.update(names)
                    else:
                        other.update(n for t in node.targets for n in target_names(t.target))
                elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr, cst.Del)):
                    other.update(target_names(node.target))
                elif isinstance(node, cst.AsName):
                    other.update(target_names(node.name))
        self.names = frozenset(literal - other)
        self.local = frozenset(literal | other)
        self.sized = path_fixed_lengths(statements) & self.local  # length tests decided per state
        self.evaluate = TypeTestEvaluator()
        self.pending: Counter[str] = Counter()
        for test in tests:
            flag = self.tested(test)
            if flag is not None:
                self.pending[flag] += 1

    def tested(self, test: cst.BaseExpression) -> str | None:
        """The flag ``test`` is (``flag`` or ``not flag``), if any."""
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            test = test.expression
        if isinstance(test, cst.Name) and test.value in self.names and not test.lpar:
            return test.value
        return None

    def split(self, test: cst.BaseExpression, states: list[PathState]) -> tuple[list[PathState], list[PathState]]:
        """The states that enter the then-branch and the else-branch of ``if test``."""
        then, orelse = self._split_flag(test, states)
        outcomes = type_test_outcomes(test, [s.concrete for s in states], self.local, self.evaluate,
                                      self.sized)
        if outcomes is None:
            return then, orelse
        # a state whose types decide the test takes only that branch (hcfg.type_tests)
        decided = {id(s): o for s, o in zip(states, outcomes)}
        return [s for s in then if decided[id(s)] is not False], [s for s in orelse if decided[id(s)] is not True]

    def _split_flag(self, test: cst.BaseExpression, states: list[PathState]
                    ) -> tuple[list[PathState], list[PathState]]:
        flag = self.tested(test)
        if flag is None:
            return states, states
        self.pending[flag] -= 1
        negated = isinstance(test, cst.UnaryOperation)
        then, orelse = [], []
        for state in states:
            value = state.concrete.get(flag)
            if not isinstance(value, bool):  # unbound here: Python would raise; keep both
                then.append(state)
                orelse.append(state)
            elif value != negated:
                then.append(state)
            else:
                orelse.append(state)
        return then, orelse

    def skip(self, tests: Iterable[cst.BaseExpression]) -> None:
        """``tests`` are in code no state reaches: they are not ahead any more."""
        for test in tests:
            flag = self.tested(test)
            if flag is not None:
                self.pending[flag] -= 1

    def merge(self, states: list[PathState], names: frozenset[str]) -> list[PathState]:
        """``merge``, keeping states apart whose flags still to be tested differ."""
        live = sorted(flag for flag in self.names if self.pending[flag] > 0)
        if not live:
            return merge(states, names)
        groups: dict[tuple, list[PathState]] = {}
        for state in states:
            groups.setdefault(tuple(state.concrete.get(flag) for flag in live), []).append(state)
        return [kept for group in groups.values() for kept in merge(group, names)]
