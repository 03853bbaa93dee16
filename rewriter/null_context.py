"""Splice ``with contextlib.nullcontext():`` blocks, which do nothing, into their block.

Also the form ExportDB's ``null_context_manager`` uses: ``ctx = contextlib.nullcontext()``
followed by ``with ctx:``, where ``ctx`` is assigned nowhere else and read only as a
``with`` item (the assignment is dropped too).

Assumes: the definition is annotated with location comments.
Guarantees: only context managers that are ``contextlib.nullcontext`` objects,
proven from the function's globals and its own assignments, are removed; every other
``with`` is left for ``rewriter.normalize`` (which refuses what it cannot splice).
"""

from __future__ import annotations

import builtins
import contextlib
import types
from typing import Any

import libcst as cst
from dycl.rewriter.walk import bound_names, descendants


def _resolves_to(node: cst.BaseExpression, fn_globals: dict[str, Any], local: set[str]) -> Any:
    if isinstance(node, cst.Name):
        if node.value in local:
            return None
        return fn_globals.get(node.value, getattr(builtins, node.value, None))
    if isinstance(node, cst.Attribute):
        base = _resolves_to(node.value, fn_globals, local)
        return getattr(base, node.attr.value, None) if isinstance(base, types.ModuleType) else None
    return None


def _is_null_call(node: cst.BaseExpression, fn_globals: dict[str, Any], local: set[str]) -> bool:
    return (isinstance(node, cst.Call) and len(node.args) <= 1 and not any(a.star for a in node.args)
            and (not node.args or isinstance(node.args[0].value, (cst.Name, cst.BaseNumber, cst.SimpleString)))
            and _resolves_to(node.func, fn_globals, local) is contextlib.nullcontext)


def _null_names(definition: cst.FunctionDef, fn_globals: dict[str, Any], local: set[str]) -> set[str]:
    """Names assigned once, to ``contextlib.nullcontext()``, and read only as ``with`` items."""
    assignments: dict[str, int] = {}
    null: set[str] = set()
    for node in descendants(definition.body):
        if isinstance(node, cst.AssignTarget | cst.AugAssign | cst.AnnAssign | cst.For):
            for name in (n.value for n in descendants(node.target) if isinstance(n, cst.Name)):
                assignments[name] = assignments.get(name, 0) + 1
        if (isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)
                and _is_null_call(node.value, fn_globals, local)):
            null.add(node.targets[0].target.value)
    with_items = {id(item.item) for node in descendants(definition.body) if isinstance(node, cst.With)
                  for item in node.items}
    reads = [n for n in descendants(definition.body) if isinstance(n, cst.Name) and n.value in null]
    targets = {id(n.targets[0].target) for n in descendants(definition.body) if isinstance(n, cst.Assign)
               and len(n.targets) == 1}
    return {name for name in null if assignments.get(name) == 1 and all(
        id(n) in with_items or id(n) in targets for n in reads if n.value == name)}


def splice_null_contexts(definition: cst.FunctionDef, fn_globals: dict[str, Any]) -> cst.FunctionDef:
    """``definition`` with its null-context ``with`` blocks spliced (see the module note)."""
    if not any(isinstance(n, cst.With) for n in descendants(definition.body)):
        return definition
    local = bound_names(definition)
    names = _null_names(definition, fn_globals, local)

    def is_null(item: cst.WithItem) -> bool:
        return item.asname is None and (isinstance(item.item, cst.Name) and item.item.value in names
                                        or _is_null_call(item.item, fn_globals, local))

    def block(stmts: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        out: list[cst.BaseStatement] = []
        for stmt in stmts:
            if isinstance(stmt, cst.With) and all(is_null(item) for item in stmt.items):
                out += block(list(stmt.body.body))
                continue
            if (isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Assign)
                    and len(stmt.body[0].targets) == 1 and isinstance(stmt.body[0].targets[0].target, cst.Name)
                    and stmt.body[0].targets[0].target.value in names):
                continue
            body = getattr(stmt, "body", None)
            if isinstance(body, cst.IndentedBlock):
                stmt = stmt.with_changes(body=body.with_changes(body=block(list(body.body))))
            orelse = getattr(stmt, "orelse", None)
            if isinstance(orelse, cst.Else):
                stmt = stmt.with_changes(orelse=orelse.with_changes(body=orelse.body.with_changes(
                    body=block(list(orelse.body.body)))))
            elif isinstance(orelse, cst.If):
                stmt = stmt.with_changes(orelse=block([orelse])[0])
            out.append(stmt)
        return out

    return definition.with_changes(body=definition.body.with_changes(body=block(list(definition.body.body))))


__all__ = ["splice_null_contexts"]
