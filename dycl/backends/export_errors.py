"""An ONNX exporter failure as ``UnsupportedError`` at the user's (or library's) line.

The TorchScript exporter refuses an operator it has no ONNX translation for
(``UnsupportedOperatorError: Exporting the operator 'aten::diff' ...``) or a value
it cannot translate (``SymbolicValueError``) with no hint of which statement of
the model computes it. ``exporter_error`` re-runs the sub-DNN on its example
under a ``TorchFunctionMode`` that watches for a call of the named operator and
keeps the stack of the first one: the sub-DNN statement that made it (mapped to
the user's file:line) and the innermost frame outside torch (library code such as
transformers' ``masking_utils.py``).

Assumes the sub-DNN runs eagerly on its first example (it did, to be traced).
Guarantees: the error names the operator, the statement and its line whenever
the operator is found; otherwise the sub-DNN's first statement.
"""

from __future__ import annotations

import os
import re
import traceback

import libcst as cst
import torch
from torch.overrides import TorchFunctionMode

from dycl.export.subdnn import SubDNNModule, Variant
from dycl.rewriter.errors import SourceLocation, UnsupportedError

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_OPERATOR = re.compile(r"operator '(?:aten::)?(?P<name>[\w.]+)'|have an op for aten::(?P<traced>[\w.]+)")
#: the tracer's own failure on an operator overload it has no schema for (``tensor + True``)
_NO_TRACED_OP = "We don't have an op for"


def tracer_lacks_op(error: Exception) -> bool:
    """Whether ``error`` is the TorchScript tracer's internal assert on an operator called with arguments
    no overload takes (``aten::add`` of a tensor and a Python bool): a refusal, not a crash of dycl."""
    return isinstance(error, RuntimeError) and _NO_TRACED_OP in str(error)


def exporter_error(error: Exception, module: SubDNNModule, variant: Variant) -> UnsupportedError:
    """``UnsupportedError`` for ``error``, raised by ``torch.onnx.export`` on ``module``."""
    text = str(error).strip()
    if _NO_TRACED_OP in text:  # the tracer's assert: its own words start there
        text = text[text.index(_NO_TRACED_OP):]
    message = text.splitlines()[0] if text else type(error).__name__
    match = _OPERATOR.search(message)
    operator = (match.group("name") or match.group("traced")) if match else None
    statement, inside = call_site(module, variant, [operator] if operator else [])
    code = cst.Module([]).code_for_node(statement.body[0]).strip()
    what = f"the operator {operator}" if operator else "a value"
    hint = ("compute this value with other tensor operations (the exporter's supported operators), or compile "
            "with backend='torch' to run it eagerly in-process")
    if re.search(r"Argument types: .*\bbool\b", message):
        hint = "a Python bool in tensor arithmetic has no traced operator: write int(flag) or float(flag); " + hint
    return UnsupportedError(
        f"{what} that the ONNX exporter cannot translate ({message[:160]}){inside}, in `{code[:120]}`",
        module.location_of(statement), hint)


def call_site(module: SubDNNModule, variant: Variant, operators: list[str]) -> tuple[cst.CSTNode, str]:
    """Where a refusal of the first of ``operators`` called points: (the sub-DNN statement that calls
    it, else the sub-DNN's first statement; ``", called at file:line"`` of the innermost non-torch
    frame of that call, else "")."""
    for operator in operators:
        statement, called_at = _first_call(module, variant, operator)
        if statement is not None:
            inside = f", called at {called_at.path}:{called_at.line}" if called_at is not None else ""
            return statement, inside
    return variant.sub.statements[0], ""


def _first_call(module: SubDNNModule, variant: Variant, operator: str) -> tuple[cst.CSTNode | None,
                                                                                 SourceLocation | None]:
    """(the sub-DNN statement, the innermost non-torch frame) of the first call of ``operator``."""
    watcher = _Watch(operator)
    try:
        with torch.no_grad(), watcher:
            module(*[t.clone() for t in variant.examples[0]])
    except Exception:  # noqa: BLE001 - only the stack of the first call is wanted
        pass
    if watcher.stack is None:
        return None, None
    statement, called_at = None, None
    for frame in watcher.stack:
        if frame.filename == module.filename:
            statement, called_at = module.statement_at(frame.lineno), None
        elif statement is not None and not frame.filename.startswith(_TORCH_DIR) and frame.filename != __file__:
            called_at = SourceLocation(frame.filename, frame.lineno)
    return statement, called_at


class _Watch(TorchFunctionMode):
    def __init__(self, operator: str) -> None:
        super().__init__()
        self.operator = operator
        self.names = (operator, f"__{operator}__", f"__r{operator}__", f"__i{operator}__")  # x + 1 is __add__
        self.stack: traceback.StackSummary | None = None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if self.stack is None and getattr(func, "__name__", None) in self.names:
            self.stack = traceback.extract_stack()
        return func(*args, **(kwargs or {}))


#: for ``onnx_float64_kernels``: the statement that first calls an operator

__all__ = ["call_site", "exporter_error", "tracer_lacks_op"]
