"""What a name chosen by data may hold, for ``rewriter.choices`` (``Domains``), and the
substitution of one possibility for the name (``Substitute``)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

import libcst as cst
from dycl.rewriter.choice_members import Members
from dycl.rewriter.values import literal_term
from dycl.rewriter.walk import bound_names, read_names


@dataclass(frozen=True)
class Alias:
    """A name bound to the member of ``members`` that the value of ``key`` (a fresh name, never
    rebound) picks, in the block ``scope`` (``Domains``)."""

    members: Members
    key: str
    scope: int


class Domains:
    """What names chosen by data may hold, for ``rewriter.choices``: a statement that reads one
    is run once per possibility, under a test of which one it is.

    - a literal domain: a name holding one of a few literals chosen by data (``act = "relu" if c
      else "tanh"`` and copies). Not flow-sensitive: the test is on the name itself where it is
      read, so a value outside a recorded domain makes the compiled model raise, never pick.
    - an alias: ``expert = self.experts[i]`` (a member the host cannot hold) is not bound; the
      readers of ``expert`` in the same block or below get the member the key picks.
    """

    def __init__(self) -> None:
        self.values: dict[str, tuple[Any, ...]] = {}
        self.aliases: dict[str, Alias] = {}
        self.lost: set[str] = set()

    def record(self, name: str, values: tuple[Any, ...] | None) -> None:
        if values:
            self.values[name] = tuple(dict.fromkeys(values))

    def alias(self, name: str, alias: Alias) -> None:
        """Record ``alias`` for ``name``: its readers in ``alias.scope`` (or below) get its members;
        a reader elsewhere is refused (``Choices.per_value``)."""
        self.values.pop(name, None)
        self.lost.discard(name)
        self.aliases[name] = alias

    def after(self, stmt: cst.BaseStatement, scope: int) -> None:
        """Follow ``stmt`` (walked in block ``scope``): a copy adds its source's domain (it may be one branch
        of a choice), a literal of the domain keeps it, any other binding drops it. A domain too
        large is safe (each value is tested), one too small makes the compiled model raise."""
        if not (self.values or self.aliases or self.lost):
            return  # most functions: nothing chosen by data is named
        bound = bound_names(stmt)
        for name in bound:
            alias = self.aliases.pop(name, None)
            if alias is not None and alias.scope != scope:
                self.lost.add(name)  # an alias on some paths only: a reader after the branch is refused
            else:
                self.lost.discard(name)
        copied = None
        if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign):
            assign = stmt.body[0]
            if len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name):
                target = assign.targets[0].target.value
                copied = self.values.get(assign.value.value) if isinstance(assign.value, cst.Name) else None
                if _literal(assign.value) in self.values.get(target, ()):
                    return  # a branch of the lifted choice itself: one of the domain's values
        previous = self.values.get(stmt.body[0].targets[0].target.value, ()) if copied is not None else ()
        for name in bound:
            self.values.pop(name, None)
        if copied is not None:  # a copy in one branch of a lifted choice: the domains of both branches
            target = stmt.body[0].targets[0].target.value
            self.values[target] = tuple(dict.fromkeys(previous + copied))

    def read_in(self, node: cst.CSTNode) -> str | None:
        """A name with a domain or an alias that ``node`` reads (not a plain copy ``a = b`` of a
        literal domain), if any."""
        if not (self.values or self.aliases or self.lost):
            return None
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Name) and node.value.value in self.values:
            return None
        if isinstance(node, cst.AugAssign) and isinstance(node.target, cst.Name) and node.target.value in self.values:
            return None
        return next((n for n in sorted(read_names(node)) if n in self.values or n in self.aliases or n in self.lost),
                    None)

    def options(self, name: str) -> tuple[list[tuple[cst.BaseExpression, cst.BaseExpression]], cst.Raise]:
        """(test, what ``name`` is where the test holds) per possibility, and the raise for none."""
        alias = self.aliases.get(name)
        if alias is None:
            tests = [(cst.Comparison(cst.Name(name), [cst.ComparisonTarget(cst.Equal(), literal_term(v))]),
                      literal_term(v)) for v in self.values[name]]
            message = '"a value chosen by data that dycl did not compile this statement for"'
            return tests, cst.Raise(cst.Call(cst.Name("RuntimeError"), [cst.Arg(cst.SimpleString(message))]))
        key = cst.Name(alias.key)
        return [(alias.members.test(key, m), m.term) for m in alias.members.members], alias.members.raise_missing(key)


class Substitute(cst.CSTTransformer):
    """Every read of ``name`` replaced by ``term`` (attribute and keyword names are not reads;
    comprehensions and lambdas, which may bind the name themselves, are left as they are)."""

    def __init__(self, name: str, term: cst.BaseExpression) -> None:
        super().__init__()
        self.name = name
        self.term = term

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        return self.term if original.value == self.name else updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
        return not isinstance(node.target, (cst.Name, cst.Tuple, cst.List))  # bound, not read

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False  # its parameters may shadow the name; the name itself is still bound there

    def visit_ListComp(self, node: cst.ListComp) -> bool:
        return False

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> bool:
        return False

    def visit_SetComp(self, node: cst.SetComp) -> bool:
        return False

    def visit_DictComp(self, node: cst.DictComp) -> bool:
        return False


def is_literal_syntax(node: cst.BaseExpression) -> bool:
    """Whether ``node`` is written as a Python literal (``2``, ``"relu"``, ``-1.5``, ``None``)."""
    return _literal(node) is not _NOT_LITERAL


def _literal(node: cst.BaseExpression) -> Any:
    try:
        return ast.literal_eval(cst.Module([]).code_for_node(node))
    except (ValueError, SyntaxError, TypeError):
        return _NOT_LITERAL


_NOT_LITERAL = object()
