"""Numbers a tensor statement reads out of the host's Python containers, computed on the host.

A tensor statement goes into a sub-DNN, and every name it reads becomes an input of that
sub-DNN, whose structure must be the same on every path that reaches it (``hcfg.variants``).
``x = x * (1 + len(vals) * 0.05)`` after a branch that appended to ``vals`` would make the list
of numbers ``vals`` an input of two lengths, and be refused; yet the statement needs one number.
``split_host_reads`` moves each such read to a host statement of its own::

    n = len(vals)                      # host
    x = x * (1 + n * 0.05)             # sub-DNN: reads the number

A *host read* is a maximal sub-expression that is not a name, whose value on every state is a
Python ``bool``, ``int`` or ``float``, that reads at least one list, tuple, dict or set, and all
of whose names hold Python values without tensors (numbers, strings, containers of them) or
builtins. Guarantees: the host computes the same value the sub-DNN would have, before it runs,
since no statement waiting for that sub-DNN (``pending``) binds a name the read reads; the
statement is otherwise unchanged. Assumes: ``evaluate`` evaluates an expression on a state as
the builder does (``HCFGBuilder.evaluate``).
"""

from __future__ import annotations

import builtins
import types
from collections.abc import Callable
from typing import Any

import libcst as cst
import torch
from dycl.rewriter.locations import comment_of, set_location
from dycl.rewriter.walk import bound_names, map_children, read_names

_CONTAINERS = (list, tuple, dict, set, frozenset)
_NUMBERS = (bool, int, float)


def split_host_reads(stmt: cst.SimpleStatementLine, states: list[dict[str, Any]],
                     evaluate: Callable[[cst.BaseExpression, dict[str, Any]], Any], fresh: Callable[[str], str],
                     pending: list[cst.SimpleStatementLine]) -> tuple[list[cst.SimpleStatementLine],
                                                                       cst.SimpleStatementLine]:
    """``(host statements, the statement reading their results)`` (see the module docstring)."""
    small = stmt.body[0]
    if not isinstance(small, (cst.Assign, cst.AugAssign)):
        return [], stmt
    waiting = set().union(*(bound_names(s) for s in pending)) if pending else set()
    host: list[cst.SimpleStatementLine] = []

    def visit(node: cst.CSTNode) -> cst.CSTNode:
        if isinstance(node, (cst.Lambda, cst.BaseComp)):
            return node
        if isinstance(node, cst.BaseExpression) and _host_read(node, states, evaluate, waiting):
            name = fresh("n")
            line = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], node)])
            host.append(set_location(line, comment_of(stmt)))
            return cst.Name(name)
        return map_children(node, visit)

    new_small = small.with_changes(value=visit(small.value))
    return (host, stmt.with_changes(body=[new_small])) if host else ([], stmt)


def _host_read(node: cst.BaseExpression, states: list[dict[str, Any]],
               evaluate: Callable[[cst.BaseExpression, dict[str, Any]], Any], waiting: set[str]) -> bool:
    if isinstance(node, (cst.Name, cst.BaseNumber, cst.BaseString)) or not isinstance(
            node, (cst.Call, cst.Subscript, cst.BinaryOperation, cst.UnaryOperation)):
        return False
    names = read_names(node)
    if not names or names & waiting:
        return False
    reads_container = False
    for state in states:
        for name in names:
            value = state.get(name, getattr(builtins, name, None))
            if isinstance(value, _CONTAINERS):
                if _holds_tensor(value):
                    return False
                reads_container = True
            elif not isinstance(value, (*_NUMBERS, str, type(None), types.BuiltinFunctionType)):
                return False
        if type(evaluate(node, state)) not in _NUMBERS:
            return False
    return reads_container


def _holds_tensor(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, dict):
        return any(_holds_tensor(v) or _holds_tensor(k) for k, v in value.items())
    if isinstance(value, _CONTAINERS):
        return any(_holds_tensor(v) for v in value)
    return not isinstance(value, (*_NUMBERS, str, type(None)))


__all__ = ["split_host_reads"]
