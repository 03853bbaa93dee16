"""Import statements inside a function body, lowered to bindings of modules already loaded.

Library code imports lazily inside functions (transformers' ``merge_with_config_defaults``
runs ``import torch`` in its loop over argument names). An import of a module that is
already in ``sys.modules`` runs no code: it only binds a name to an existing object. Such an
import becomes ``name = _dycl_import_0``, a name ``ParsedFunction.globals`` binds to that
object, so the static flow knows the module as it knows a global one.

An import that would run code (a module not loaded yet, ``from m import *``, a name the
module does not have) stays as written: ``rewriter.check`` lets it through and
``rewriter.verify`` refuses it where it is still reached after constant propagation (a
``from .debugging import ...`` in a branch that is dead for this call form is dropped first).

Assumes: ``function`` is the function ``definition`` was parsed from (its ``__globals__``
name its package, for relative imports). Guarantees: nothing is imported; each lowered name
is bound to the object Python's import would bind it to now.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from typing import Any

import libcst as cst

_NOT_FOUND = object()


def lower_local_imports(definition: cst.FunctionDef,
                        function: types.FunctionType) -> tuple[cst.FunctionDef, dict[str, Any]]:
    """``definition`` with every import of loaded modules lowered (module note), and the
    globals the lowered assignments read."""
    lowering = _Lowering(function)
    return definition.visit(lowering), lowering.bound


class _Lowering(cst.CSTTransformer):
    def __init__(self, function: types.FunctionType) -> None:
        super().__init__()
        self.scope = function.__globals__
        self.bound: dict[str, Any] = {}

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine,
                                  updated: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        body: list[cst.BaseSmallStatement] = []
        for small in updated.body:
            bindings = self._bindings(small) if isinstance(small, (cst.Import, cst.ImportFrom)) else None
            if bindings is None:
                body.append(small)
                continue
            for name, value in bindings:
                source = f"_dycl_import_{len(self.bound)}"
                self.bound[source] = value
                body.append(cst.Assign([cst.AssignTarget(cst.Name(name))], cst.Name(source)))
        return updated.with_changes(body=body)

    def _bindings(self, node: cst.Import | cst.ImportFrom) -> list[tuple[str, Any]] | None:
        pairs = _import_pairs(node, self.scope) if isinstance(node, cst.Import) else _from_pairs(node, self.scope)
        if pairs is None or any(value is _NOT_FOUND for _, value in pairs):
            return None
        return pairs


def _dotted(node: cst.BaseExpression) -> str:
    return cst.Module([]).code_for_node(node).replace(" ", "")


def _import_pairs(node: cst.Import, scope: dict[str, Any]) -> list[tuple[str, Any]]:
    pairs = []
    for alias in node.names:
        dotted = _dotted(alias.name)
        if dotted not in sys.modules:
            return [("", _NOT_FOUND)]
        if alias.asname is not None:
            pairs.append((_dotted(alias.asname.name), sys.modules[dotted]))
        else:
            top = dotted.split(".")[0]
            pairs.append((top, sys.modules.get(top, _NOT_FOUND)))
    return pairs


def _from_pairs(node: cst.ImportFrom, scope: dict[str, Any]) -> list[tuple[str, Any]] | None:
    if isinstance(node.names, cst.ImportStar):
        return None
    relative = "." * len(node.relative)
    written = relative + (_dotted(node.module) if node.module is not None else "")
    package = scope.get("__package__") or (scope.get("__name__", "") or "").rpartition(".")[0]
    try:
        name = importlib.util.resolve_name(written, package) if relative else written
    except (ImportError, ValueError):
        return None
    module = sys.modules.get(name)
    if module is None:
        return None
    pairs = []
    for alias in node.names:
        attribute = _dotted(alias.name)
        value = getattr(module, attribute, _NOT_FOUND)
        if value is _NOT_FOUND:
            value = sys.modules.get(f"{name}.{attribute}", _NOT_FOUND)
        pairs.append((_dotted(alias.asname.name) if alias.asname is not None else attribute, value))
    return pairs


__all__ = ["lower_local_imports"]
