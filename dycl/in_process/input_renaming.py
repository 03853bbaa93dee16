"""Keep the name of an input that ``forward`` updates in place bound to the caller's tensor.

``x.mul_(0.5)`` changes the caller's tensor; ``x = self.fc(x)`` afterwards gives the *name* a new
value, and the caller's tensor is no longer reachable by it at the return, where
``dycl.in_process.written_inputs`` reads each updated input's final value. So every assignment to such a
name, and every read after it, is renamed to a fresh name (``x_1 = self.fc(x)``), as in SSA
form: the input's own name then holds the caller's tensor to the end.

Assumes: the rewritten function is loop-free — a tree of ``if`` statements over simple
statements (``rewriter``'s guarantee) — and holds no nested ``def`` or ``class``; a name bound
inside a comprehension or a lambda is that scope's own (``NameReplacer`` leaves it alone).
Guarantees: on every path, each read of a renamed input sees the value the original program's
read saw: at a join of branches that end with different names, each branch that falls through
assigns one fresh join name (``x_3 = x_1`` / ``x_3 = x``). The input's own name is never
assigned. A later in-place update through a new name that still shares the caller's storage (a
view, ``x = x[:1]``, or a join that kept ``x``) is refused where the HCFG is built
(``hcfg.aliasing``), as any aliased update is. Returns ``None`` (nothing renamed) where the body
has a nested ``def`` or ``class``, a ``del``, ``global`` or ``nonlocal``, an ``elif``, a line of
several statements, or a walrus on the name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import libcst as cst

from dycl.rewriter import RewrittenFunction
from dycl.rewriter.locations import comment_of, set_location
from dycl.rewriter.substitute import NameReplacer
from dycl.rewriter.walk import descendants

_UNHANDLED = (cst.FunctionDef, cst.ClassDef, cst.Del, cst.Global, cst.Nonlocal)


def keep_input_names(rewritten: RewrittenFunction, names: Iterable[str]) -> RewrittenFunction | None:
    """``rewritten`` with every assignment to one of ``names`` (and the reads after it) renamed;
    ``rewritten`` itself if none is assigned; ``None`` where the body is outside the assumptions."""
    definition = renamed_definition(rewritten.definition, names)
    if definition is None or definition is rewritten.definition:
        return None if definition is None else rewritten
    return dataclasses.replace(rewritten, definition=definition, source=cst.Module([definition]).code)


def renamed_definition(definition: cst.FunctionDef, names: Iterable[str]) -> cst.FunctionDef | None:
    """``definition`` renamed as ``keep_input_names`` renames (the same object if nothing changes)."""
    body = list(definition.body.body)
    if any(isinstance(node, _UNHANDLED) for stmt in body for node in descendants(stmt)):
        return None
    taken = {node.value for node in descendants(definition) if isinstance(node, cst.Name)}
    try:
        for name in names:
            body, _ = _Renamer(name, taken).block(body, name)
    except _Unhandled:
        return None
    if len(body) == len(definition.body.body) and all(
            new.deep_equals(old) for new, old in zip(body, definition.body.body)):
        return definition
    return definition.with_changes(body=definition.body.with_changes(body=body))


class _Renamer:
    """Renames one input's assignments and later reads, block by block (see the module note)."""

    def __init__(self, name: str, taken: set[str]) -> None:
        self.name = name
        self.taken = taken

    def fresh(self) -> str:
        index = 1
        while f"{self.name}_{index}" in self.taken:
            index += 1
        self.taken.add(f"{self.name}_{index}")
        return f"{self.name}_{index}"

    def block(self, stmts: list[cst.BaseStatement], current: str) -> tuple[list[cst.BaseStatement], str | None]:
        """``stmts`` renamed when the input's value is in ``current`` on entry; and the name that
        holds it at the end (``None`` when every path exits)."""
        out: list[cst.BaseStatement] = []
        for stmt in stmts:
            if current is None:  # after a return or raise: unreachable, left as it is
                out.append(stmt)
                continue
            if isinstance(stmt, cst.If):
                stmt, current = self.branches(stmt, current)
            else:
                stmt, current = self.simple(stmt, current)
            out.append(stmt)
        return out, current

    def simple(self, stmt: cst.BaseStatement, current: str) -> tuple[cst.BaseStatement, str | None]:
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            raise _Unhandled
        small = stmt.body[0]
        assigned = _assigns(small, self.name)
        target = self.fresh() if assigned else current
        renamed = stmt.visit(_ReadsThenTarget(self.name, current, target if assigned else None))
        return renamed, None if isinstance(small, (cst.Return, cst.Raise)) else target

    def branches(self, stmt: cst.If, current: str) -> tuple[cst.If, str | None]:
        if isinstance(stmt.orelse, cst.If):
            raise _Unhandled  # the rewriter leaves no elif (rewriter.structure)
        test = stmt.test.visit(NameReplacer(lambda n: cst.Name(current) if n == self.name else None))
        then, then_end = self.block(list(stmt.body.body), current)
        orelse, else_end = (self.block(list(stmt.orelse.body.body), current) if stmt.orelse is not None
                            else ([], current))
        ends = {end for end in (then_end, else_end) if end is not None}
        if len(ends) > 1:  # two names meet: each branch that falls through assigns one join name
            join = self.fresh()
            then, orelse = then + [_copy(join, then_end, stmt)], orelse + [_copy(join, else_end, stmt)]
            ends = {join}
        new = stmt.with_changes(test=test, body=stmt.body.with_changes(body=then))
        if orelse:
            block = stmt.orelse.body if stmt.orelse is not None else cst.IndentedBlock(body=[])
            new = new.with_changes(orelse=cst.Else(body=block.with_changes(body=orelse)))
        return new, next(iter(ends)) if ends else None


class _Unhandled(Exception):
    """The body is outside the module's assumptions: nothing is renamed."""


class _ReadsThenTarget(NameReplacer):
    """Reads of ``name`` become ``current``; the assignment target ``name`` becomes ``target``.
    Targets are found by their place in the tree, not by node identity: inlined code may share
    one ``Name`` object between a target and a read (``x = x * 0.5``)."""

    def __init__(self, name: str, current: str, target: str | None) -> None:
        super().__init__(lambda n: cst.Name(current) if n == name and current != name else None)
        self.name = name
        self.target = target

    def leave_AssignTarget(self, original: cst.AssignTarget, updated: cst.AssignTarget) -> cst.AssignTarget:
        return updated.with_changes(target=self._retarget(original.target, updated.target))

    def leave_AnnAssign(self, original: cst.AnnAssign, updated: cst.AnnAssign) -> cst.AnnAssign:
        return updated.with_changes(target=self._retarget(original.target, updated.target))

    def _retarget(self, original: cst.BaseExpression, updated: cst.BaseExpression) -> cst.BaseExpression:
        if self.target is None:
            return updated
        if isinstance(original, cst.Name):
            return cst.Name(self.target) if original.value == self.name else updated
        if isinstance(original, (cst.Tuple, cst.List)):
            elements = [new.with_changes(value=self._retarget(old.value, new.value))
                        for old, new in zip(original.elements, updated.elements)]
            return updated.with_changes(elements=elements)
        return updated


def _assigns(small: cst.BaseSmallStatement, name: str) -> bool:
    """Whether ``small`` assigns ``name`` as a whole (``_Unhandled`` for a walrus on it, which
    rebinds it in the middle of the statement)."""
    for node in descendants(small):
        targets: list[cst.BaseExpression] = []
        if isinstance(node, cst.NamedExpr) and isinstance(node.target, cst.Name) and node.target.value == name:
            raise _Unhandled
        if isinstance(node, cst.Assign):
            targets = [t.target for t in node.targets]
        elif isinstance(node, cst.AnnAssign) and node.value is not None:
            targets = [node.target]
        for target in targets:
            elements = target.elements if isinstance(target, (cst.Tuple, cst.List)) else [cst.Element(target)]
            if any(isinstance(e.value, cst.Name) and e.value.value == name for e in elements):
                return True
    return False


def _copy(join: str, source: str, where: cst.If) -> cst.SimpleStatementLine:
    line = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(join))], cst.Name(source))])
    return set_location(line, comment_of(where))
