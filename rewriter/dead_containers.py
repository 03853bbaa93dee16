"""Drop the statements that only build and change a container nothing reads.

After constant propagation, a per-call config dict or a list of counters is
often read only at compile time: every read was folded, and what is left at
run time is the dict's creation and its updates. Later stages treat those as
host work on Python values, which some cannot run; dropping them is exact.

Assumes: loop-free code (after constant propagation).
Guarantees: ``N = M`` is dropped when ``N`` occurs nowhere else (dropped lines
aside, to a fixed point) and ``M`` is *inert*: a name or a chain of attributes of one
(``threshold = self.thresholds``: the binding of a static parameter whose every read
was folded; reading an attribute of a module or of a config object changes nothing),
a literal, a subscript of an inert value by a literal, a tuple of inert values, or an
f-string of inert values (``func_name = f"{args[0].__class__.__name__}.forward"``, a
library's name for a warning no path gives). Any other
statement is dropped only when it changes nothing but a
*dead container* ``N``: a local whose first occurrence is a top-level
``N = <display>``, every binding of which is a display or another dead
container, and every occurrence of which is one of ``N = ...``,
``N.<mutating method>(...)``, ``N[k] = ...``, ``N[k] op= ...``, ``del N[k]``,
``N op= ...`` — with no call anywhere in the statement (a call may have
effects of its own). Such an ``N`` is a fresh object that no other name and
no other object reaches, so its contents cannot affect the result.
"""

from __future__ import annotations

import libcst as cst
from dycl.rewriter.exits import Block
from dycl.rewriter.vocabulary import MUTATING_METHODS
from dycl.rewriter.walk import descendants

_DISPLAYS = (cst.List, cst.Dict, cst.Set, cst.Tuple)


def drop_dead_containers(body: Block) -> Block:
    """``body`` without the statements that only touch dead containers."""
    lines = list(_lines(body))
    owners = {id(line): _own_write(line) if isinstance(line, cst.SimpleStatementLine) else None for line in lines}
    candidates = _first_bound_by_display(body)
    while True:
        dead = {name for name in candidates if _only_own_writes(name, lines, owners, candidates)}
        if dead == candidates:
            break
        candidates = dead
    drop = {id(line) for line in lines if owners[id(line)] in candidates}
    drop |= _unread_aliases(lines)
    return _without(body, drop) if drop else body


def _is_inert(node: cst.BaseExpression) -> bool:
    """A value whose computation changes nothing (module note): no call anywhere."""
    if isinstance(node, cst.Attribute):
        return _is_inert(node.value)
    if isinstance(node, (cst.Name, cst.BaseNumber, cst.SimpleString)):
        return True
    if isinstance(node, cst.Subscript):
        return _is_inert(node.value) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index) and (
            isinstance(node.slice[0].slice.value, (cst.BaseNumber, cst.SimpleString)))
    if isinstance(node, cst.Tuple):
        return all(not isinstance(e, cst.StarredElement) and _is_inert(e.value) for e in node.elements)
    if isinstance(node, cst.FormattedString):
        return all(isinstance(p, cst.FormattedStringText) or (
            p.format_spec is None and _is_inert(p.expression)) for p in node.parts)
    return False


def _unread_aliases(lines) -> set[int]:
    """Lines ``N = M`` (``M`` inert) where ``N`` occurs nowhere else: binding it does nothing.
    Repeated until nothing more is dropped (a dropped line's reads no longer count)."""
    dropped: set[int] = set()
    while True:
        bindings: dict[str, list[int]] = {}
        mentions: dict[str, int] = {}
        for line in lines:
            if id(line) in dropped:
                continue
            for node in descendants(line):
                if isinstance(node, cst.Name):
                    mentions[node.value] = mentions.get(node.value, 0) + 1
            small = line.body[0] if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 else None
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(
                    small.targets[0].target, cst.Name) and _is_inert(small.value):
                bindings.setdefault(small.targets[0].target.value, []).append(id(line))
        more = {line for name, found in bindings.items() if mentions[name] == len(found) for line in found}
        if more <= dropped:
            return dropped
        dropped |= more


def _lines(body: Block):
    """Every statement line of ``body``, and every ``if`` test."""
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            yield stmt
        elif isinstance(stmt, cst.If):
            yield stmt.test
            yield from _lines(list(stmt.body.body))
            orelse = stmt.orelse
            while isinstance(orelse, cst.If):
                yield orelse.test
                yield from _lines(list(orelse.body.body))
                orelse = orelse.orelse
            if orelse is not None:
                yield from _lines(list(orelse.body.body))


def _own_write(line: cst.SimpleStatementLine) -> str | None:
    """The container a one-statement line only writes to, or None."""
    if len(line.body) != 1 or any(isinstance(n, cst.Call) for n in descendants(line)
                                  if not _is_method_call_of_line(n, line)):
        return None
    small = line.body[0]
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = small.targets[0].target
        if isinstance(target, cst.Name) and isinstance(small.value, (*_DISPLAYS, cst.Name)):
            return target.value
        return _subscript_base(target)
    if isinstance(small, cst.AugAssign):
        return small.target.value if isinstance(small.target, cst.Name) else _subscript_base(small.target)
    if isinstance(small, cst.Del):
        return _subscript_base(small.target)
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        func = small.value.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and (
                func.attr.value in MUTATING_METHODS):
            return func.value.value
    return None


def _is_method_call_of_line(node: cst.CSTNode, line: cst.SimpleStatementLine) -> bool:
    small = line.body[0]
    return isinstance(small, cst.Expr) and node is small.value


def _subscript_base(target: cst.BaseExpression) -> str | None:
    if isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
        return target.value.value
    return None


def _first_bound_by_display(body: Block) -> set[str]:
    """Names whose first occurrence is a top-level ``N = <display>``."""
    found: set[str] = set()
    seen: set[str] = set()
    for stmt in body:
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        if (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)
                and isinstance(small.value, _DISPLAYS) and small.targets[0].target.value not in seen):
            found.add(small.targets[0].target.value)
        seen.update(n.value for n in descendants(stmt) if isinstance(n, cst.Name))
    return found


def _only_own_writes(name: str, lines, owners: dict[int, str | None], candidates: set[str]) -> bool:
    for line in lines:
        mentions = any(isinstance(n, cst.Name) and n.value == name for n in descendants(line))
        if not mentions:
            continue
        if owners[id(line)] != name:
            return False
        small = line.body[0]  # an own write is a statement line
        if isinstance(small, cst.Assign) and isinstance(small.targets[0].target, cst.Name) and isinstance(
                small.value, cst.Name) and small.value.value not in candidates:
            return False
    return True


def _without(body: Block, drop: set[int]) -> Block:
    out: Block = []
    for stmt in body:
        if id(stmt) in drop:
            continue
        if isinstance(stmt, cst.If):
            stmt = _if_without(stmt, drop)
        out.append(stmt)
    return out


def _if_without(stmt: cst.If, drop: set[int]) -> cst.If:
    body = _without(list(stmt.body.body), drop) or [cst.SimpleStatementLine([cst.Pass()])]
    orelse = stmt.orelse
    if isinstance(orelse, cst.If):
        orelse = _if_without(orelse, drop)
    elif orelse is not None:
        orelse = orelse.with_changes(body=orelse.body.with_changes(
            body=_without(list(orelse.body.body), drop) or [cst.SimpleStatementLine([cst.Pass()])]))
    return stmt.with_changes(body=stmt.body.with_changes(body=body), orelse=orelse)
