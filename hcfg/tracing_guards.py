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
below refuses the decision). The same holds for a decision after an *early exit*
on tracing in the same function (transformers' ``_ignore_causal_mask_sdpa``)::

    if is_torchdynamo_exporting() or (padding_mask is not None and is_tracing(padding_mask)):
        return False
    ...
    if (q_length == 1 or kv_length == q_length) and fast_all(padding_mask):
        return True

an ``if`` whose test calls a tracing predicate outside any ``not`` and whose body
ends in ``return`` or ``raise``, before the decision's statement in a block that
encloses it: under the tracer the function has left before the decision.

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
    """Whether the decision at ``where`` follows a ``not <tracing predicate>`` in an ``and``,
    or an early exit on tracing in its function (see the module note)."""
    if where is None:
        return False
    tree = _parsed(where.path)
    if tree is None:
        return False
    return _after_a_guard_in_an_and(tree, where.line) or _after_an_exit_on_tracing(tree, where.line)


def _after_a_guard_in_an_and(tree: ast.Module, line: int) -> bool:
    for node in ast.walk(tree):
        if not (isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And)):
            continue
        # every operand on the decision's line after a tracing guard (a guard itself reads no tensor)
        for position, operand in enumerate(node.values):
            on_line = operand.lineno <= line <= (operand.end_lineno or operand.lineno)
            if on_line and not _not_tracing(operand) and any(_not_tracing(e) for e in node.values[:position]):
                return True
    return False


def _after_an_exit_on_tracing(tree: ast.Module, line: int) -> bool:
    """Whether ``line`` is in the function with the innermost enclosing definition after an
    early exit on tracing in a block (of that function) that encloses ``line``."""
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and n.lineno <= line <= (n.end_lineno or n.lineno)]
    if not functions:
        return False
    block = max(functions, key=lambda f: f.lineno).body
    while block:
        for position, statement in enumerate(block):
            if statement.lineno <= line <= (statement.end_lineno or statement.lineno):
                if any(_exits_on_tracing(s) for s in block[:position]):
                    return True
                block = _inner_block(statement, line)
                break
        else:
            return False
    return False


def _inner_block(statement: ast.stmt, line: int) -> list[ast.stmt]:
    """The block of ``statement`` (not a nested definition's) that holds ``line``, or []."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
        return []
    for field in ("body", "orelse", "finalbody"):
        block = getattr(statement, field, None) or []
        if block and block[0].lineno <= line <= (block[-1].end_lineno or block[-1].lineno):
            return block
    return []


def _exits_on_tracing(statement: ast.stmt) -> bool:
    """``if <test true while tracing>: ...; return/raise`` (a predicate called outside any ``not``)."""
    if not (isinstance(statement, ast.If) and statement.body):
        return False
    if not isinstance(statement.body[-1], (ast.Return, ast.Raise)):
        return False
    return _calls_predicate_positively(statement.test)


def _calls_predicate_positively(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return False
    if _is_predicate_call(node):
        return True
    if isinstance(node, ast.BoolOp):
        return any(_calls_predicate_positively(value) for value in node.values)
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
