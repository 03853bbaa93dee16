"""Reads of host-kept containers inside a tensor statement become host work.

A set (``seen = {5}``, ``seen.add(int(x.sum() > 0))``) is a value the host keeps, as it keeps
lists and dicts; unlike theirs, its size and members depend on the data it was given
(adding a member it holds changes nothing), not on the path, so no port can carry it into a
sub-DNN with one structure (``hcfg.pytree_ports``). A tensor statement that reads one::

    x = x + len(seen) * 0.1

is split; so is one reading a list, tuple or dict of Python numbers and strings (``len(vals)``,
``cfg["scale"]``), whose length or keys may differ by path (``vals.append(2)`` on one branch) where
the statement needs only a number. Each largest subexpression that reads such a container, reads no tensor and has a
Python number, bool or string value, or is an item of it (``items[-1]``), is computed by the
host into a fresh variable, which the sub-DNN takes as an input (a port, never a constant)::

    n = len(seen)            # host
    x = x + n * 0.1          # sub-DNN

An ``if`` test or a returned value that mixes tensor code with such reads is split the same
way (``split_expression_reads``).

Assumes: ``evaluate`` gives an expression's value on the example state (``hcfg.build``), or
an unknown marker. Guarantees: the new host lines compute exactly the subexpressions they
replace, in the statement's evaluation order, before it; a statement reading no such
container is returned as it is (the same node).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import libcst as cst
import torch
from dycl.rewriter.locations import comment_of, set_location
from dycl.rewriter.walk import map_children, read_names

#: containers the host keeps that no port carries (their size depends on the data put in them)
HOST_CONTAINERS = (set, frozenset, collections.deque)
_HOST_VALUES = (bool, int, float, str)
Evaluate = Callable[[cst.BaseExpression, dict[str, Any]], Any]


def split_host_reads(stmt: cst.SimpleStatementLine, state: dict[str, Any], evaluate: Evaluate,
                     fresh: Callable[[], str]) -> tuple[list[cst.SimpleStatementLine], cst.SimpleStatementLine]:
    """The host lines computing the reads of host-kept containers in ``stmt``'s value (an
    assignment's), and ``stmt`` reading their results (see the module note); ``fresh`` names each."""
    small = stmt.body[0]
    if not isinstance(small, (cst.Assign, cst.AugAssign)):
        return [], stmt
    lines, value = split_expression_reads(small.value, stmt, state, evaluate, fresh)
    return lines, stmt if not lines else stmt.with_changes(body=[small.with_changes(value=value)])


def split_expression_reads(node: cst.BaseExpression, stmt: cst.BaseStatement, state: dict[str, Any],
                           evaluate: Evaluate, fresh: Callable[[], str]
                           ) -> tuple[list[cst.SimpleStatementLine], cst.BaseExpression]:
    """Like ``split_host_reads`` for the expression ``node`` of ``stmt`` (an ``if`` test, a returned value)."""
    kept = {name for name, value in state.items() if _host_kept(value)}
    if not kept & read_names(node):
        return [], node
    lines: list[cst.SimpleStatementLine] = []

    def visit(current: cst.CSTNode) -> cst.CSTNode:
        if isinstance(current, (cst.Lambda, cst.BaseComp)):
            return current  # its names are bound per call of it, not here
        if isinstance(current, cst.BaseExpression) and _host_part(current, kept, state, evaluate):
            name = fresh()
            assign = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], current)])
            lines.append(set_location(assign, comment_of(stmt)))
            return cst.Name(name)
        return map_children(current, visit)

    return lines, visit(node)


def _host_kept(value: Any) -> bool:
    """A container the host keeps: a set or deque, or a list, tuple or dict of Python numbers and
    strings (its length or keys may differ by path: ``vals.append(2)`` on one branch)."""
    if isinstance(value, HOST_CONTAINERS):
        return True
    items = value.values() if type(value) is dict else value if type(value) in (list, tuple) else None
    return items is not None and all(type(item) in _HOST_VALUES for item in items)


def _host_part(node: cst.BaseExpression, kept: set[str], state: dict[str, Any], evaluate: Evaluate) -> bool:
    names = read_names(node)
    if not names & kept or any(isinstance(state.get(name), torch.Tensor) for name in names):
        return False
    value = evaluate(node, state)
    if type(value) in _HOST_VALUES:
        return True
    # a tensor picked from such a container or a list (one appended on an earlier call): moving it is
    # host work; one picked from the model's weights is not (the graph indexes them, the host the index)
    return isinstance(value, torch.Tensor) and isinstance(node, cst.Subscript) and all(
        isinstance(state.get(name), (*HOST_CONTAINERS, list, tuple)) for name in read_names(node.value))


__all__ = ["HOST_CONTAINERS", "split_expression_reads", "split_host_reads"]
