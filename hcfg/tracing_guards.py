"""Library decisions that the exporter's trace skips: ``not is_tracing(x) and x.all()``.

Libraries guard data-dependent shortcuts so that tracing compilers never take
them; transformers' mask code, for one::

    if not is_tracing(packed_sequence_mask) and (packed_sequence_mask[:, -1] == 0).all():
        return None

In eager mode (how dycl runs each sub-DNN on the examples, ``hcfg.trace``) the
``.all()`` is a decision; under the TorchScript tracer that exports the sub-DNN,
``is_tracing`` is true and the ``and`` stops before it, so the graph takes the
library's general path, which the library keeps equal to the shortcut.

``skipped_when_tracing(where)`` says whether the decision at ``where`` is a later
operand of such an ``and``: an earlier operand is ``not (...)`` around a call of
one of the tracing predicates below (``not (exporting() or (m is not None and
is_tracing(m)))`` too: where the guard does not stop the ``and``, the export check
below refuses the decision).

Assumes: the predicates are true while ``torch.onnx.export`` traces. Soundness
does not rest on it: a decision that is made after all while tracing is refused
at export time (``dycl.backends.onnx_export``: a tensor converted to a Python
value outside torch raises ``UnsupportedError``), and the torch backend runs
the library eagerly on every call.
"""

from __future__ import annotations

import ast
import functools

from dycl.rewriter.errors import SourceLocation

#: functions that are true while the TorchScript tracer runs (``torch.jit.is_tracing``,
#: transformers' ``is_tracing``/``is_jit_tracing``); dynamo's predicates are false there
TRACING_PREDICATES = frozenset({"is_tracing", "is_jit_tracing"})


def skipped_when_tracing(where: SourceLocation | None) -> bool:
    """Whether the decision at ``where`` follows a ``not <tracing predicate>`` in an ``and``."""
    if where is None:
        return False
    tree = _parsed(where.path)
    if tree is None:
        return False
    for node in ast.walk(tree):
        if not (isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And)):
            continue
        # every operand on the decision's line after a tracing guard (a guard itself reads no tensor)
        for position, operand in enumerate(node.values):
            on_line = operand.lineno <= where.line <= (operand.end_lineno or operand.lineno)
            if on_line and not _not_tracing(operand) and any(_not_tracing(e) for e in node.values[:position]):
                return True
    return False


def _not_tracing(node: ast.expr) -> bool:
    if not (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)):
        return False
    return any(_is_predicate_call(inner) for inner in ast.walk(node.operand))


def _is_predicate_call(node: ast.expr) -> bool:
    if not isinstance(node, ast.Call):
        return False
    function = node.func
    name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", None)
    return name in TRACING_PREDICATES


@functools.lru_cache(maxsize=64)
def _parsed(path: str) -> ast.Module | None:
    try:
        with open(path, encoding="utf-8") as file:
            return ast.parse(file.read(), path)
    except (OSError, SyntaxError, ValueError):
        return None


__all__ = ["TRACING_PREDICATES", "skipped_when_tracing"]
