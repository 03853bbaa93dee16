"""Host assignments whose value is fixed by dtypes: ``min_value = torch.finfo(dtype).min``.

Host code cannot use torch, but a value computed only from dtypes and devices held by locals
(``dtype = x.dtype``), from globals (``torch``) and from literals is the same on every call
that follows one path: a tensor's dtype is fixed there (an input's by the host's checks, a
sub-DNN output's by its export) and exploration keeps states holding different dtypes apart
(``hcfg.state``: a dtype is one object per dtype). So where every explored state gives it one
plain value (a number, a bool, a string, None), the assignment becomes that literal.

Assumes: ``states`` are every explored state after the statement ran, and ``local`` the
function's local names. Guarantees: only a single-name assignment is folded, only where it reads
a local, each local it reads holds a dtype or device in every state and the target is not one of them, and
only to a literal that reads back as the same value; anything else is returned unchanged.
"""

from __future__ import annotations

import math
from typing import Any

import libcst as cst
import torch
from dycl.rewriter.walk import read_names

#: what a local read by a folded assignment may hold
_STATIC_KINDS = (torch.dtype, torch.device)


def _literal(value: Any) -> cst.BaseExpression | None:
    if value is None or isinstance(value, bool):
        return cst.Name(repr(value))
    if isinstance(value, int):
        return cst.parse_expression(repr(value))
    if isinstance(value, float) and math.isfinite(value):
        return cst.parse_expression(repr(value))
    if isinstance(value, str):
        return cst.parse_expression(repr(value))
    return None


def folded_host_value(stmt: cst.SimpleStatementLine, states: list[dict[str, Any]],
                      local: frozenset[str]) -> cst.SimpleStatementLine:
    """``stmt`` with its value replaced by the literal it has in every state, where it is
    fixed by dtypes (see the module note); ``stmt`` otherwise."""
    small = stmt.body[0] if len(stmt.body) == 1 else None
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name)) or not states:
        return stmt
    target = small.targets[0].target.value
    reads = read_names(small.value) & local
    if target in reads or not all(isinstance(state.get(name), _STATIC_KINDS) for name in reads for state in states):
        return stmt
    values = [state.get(target) for state in states]
    first = values[0]
    if any(type(value) is not type(first) or value != first for value in values[1:]):
        return stmt
    literal = _literal(first)
    if literal is None or not reads:  # one that reads no dtype (``time.time()``) stays host code
        return stmt
    return stmt.with_changes(body=[small.with_changes(value=literal)])


__all__ = ["folded_host_value"]
