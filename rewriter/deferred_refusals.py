"""Refusals that wait for constant propagation: a statement dycl cannot compile, refused only
where it is still reached for this call form.

Library code guards what dycl cannot compile behind flags that are static at each call site
(transformers' ``merge_with_config_defaults`` writes ``self.config.is_causal`` only
``if is_causal is not None``, and enters a debugging context only ``if kwargs.get("debug_io")``).
``defer`` (state writes) and ``marker`` (a ``with`` of another context manager) replace each
such statement, found before any rewriting, by ``_dycl_refused_<n>()``, a call of a ``DeferredRefusal`` that holds the
error (with the statement's own location); the passes treat it as an opaque call, constant
propagation drops it with its dead branch, and ``rewriter.verify`` raises the error of every
marker left in the rewritten body.

Assumes: ``verify`` runs on every body the full pipeline rewrites (``rewriter.pipeline``).
Guarantees: a marker never reaches the HCFG: each statement deferred is either dropped as
dead or refused with the error it would have raised before rewriting.
"""

from __future__ import annotations

from typing import Any

import libcst as cst
from dycl.rewriter.errors import UnsupportedError
from dycl.rewriter.locations import comment_of, set_location


class DeferredRefusal:
    """The error of a statement refused where it is still reached (module note)."""

    def __init__(self, error: UnsupportedError) -> None:
        self.error = error

    def __repr__(self) -> str:
        return f"DeferredRefusal({self.error})"


def defer(definition: cst.FunctionDef,
          refusals: dict[int, UnsupportedError]) -> tuple[cst.FunctionDef, dict[str, DeferredRefusal]]:
    """``definition`` with each statement line whose id is in ``refusals`` replaced by its
    marker, and the globals the markers name."""
    if not refusals:
        return definition, {}
    markers: dict[str, DeferredRefusal] = {}

    class Replace(cst.CSTTransformer):
        def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine,
                                      updated: cst.SimpleStatementLine) -> cst.BaseStatement:
            error = refusals.get(id(original))
            if error is None:
                return updated
            name = f"_dycl_refused_{len(markers)}"
            markers[name] = DeferredRefusal(error)
            line = cst.SimpleStatementLine([cst.Expr(cst.Call(cst.Name(name)))], leading_lines=updated.leading_lines)
            return set_location(line, comment_of(original))

    return definition.visit(Replace()), markers


def marker(ctx: Any, stmt: cst.BaseStatement, error: UnsupportedError) -> cst.SimpleStatementLine:
    """The marker line that stands for ``stmt`` in a pass (a global ``ctx`` introduces)."""
    static = ctx.globals.introduce("_dycl_refused", DeferredRefusal(error))
    return set_location(cst.SimpleStatementLine([cst.Expr(cst.Call(static.term))]), comment_of(stmt))


def refusal_in(stmt: cst.BaseStatement, resolve: Any) -> UnsupportedError | None:
    """The error of the marker ``stmt`` is (``resolve``: a name to its ``Static``, or None)."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return None
    for small in stmt.body:
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and isinstance(
                small.value.func, cst.Name) and small.value.func.value.startswith("_dycl_refused"):
            static = resolve(small.value.func)
            if static is not None and isinstance(static.value, DeferredRefusal):
                return static.value.error
    return None


__all__ = ["DeferredRefusal", "defer", "marker", "refusal_in"]
