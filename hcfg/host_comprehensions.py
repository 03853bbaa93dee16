"""Comprehensions over tensors in host code: ``if any(r.sum() > 1 for r in x.unbind(0)):``.

The host runs on numpy arrays, so a comprehension left in host code that iterates a
tensor (``x.unbind(0)``, ``x.split(2)``, a list of tensors) would call torch's methods on
numpy arrays. Such a comprehension is placed in one of two ways:

- where building it reads tensor values (an ``if`` filter on data, elements that are Python
  numbers from ``.item()``: ``reads_data``), it is refused at the user's line with
  ``UnsupportedError``: the host would have to decide element by element;
- otherwise a comprehension whose elements are tensors moves to the preceding sub-DNN as
  ``t = [element for r in iterable if ...]`` (its ``if``s then test only shapes or types,
  which the export fixes), and the host reduces the list it returns (``any(t)``, ``sum(t)``,
  ``t`` itself). Iterating a tensor reads no value; its length is the dim's, which the
  export checks like every other shape;
- one with other elements (``[r.shape[0] for r in x.unbind(0)]``) stays host code, iterating what
  the host holds: the tensor itself for ``t.unbind()``/``t.unbind(0)`` (rows either way), a name
  as it is, any other iterable (``x.split(2, 1)``) computed by the preceding sub-DNN as a list
  (``host_iterable``). The host sees numpy arrays there, so its loop variable may only be read
  for its metadata (``.shape``, ``.ndim``, ``len()``, ``.size()``, ``.dim()``, ``.numel()``, made
  portable by ``hcfg.portable``); another use (``r.dtype``, ``r.tolist()``, ``f(r)``) is refused
  at the user's line (``foreign_use``), as is a second ``for``.

Assumes: ``evaluate`` gives an expression's value on the example's state, or a non-tensor
for one it could not evaluate. Guarantees: a comprehension whose iterable is no tensor
and no list of tensors (``[x * i for i in range(n)]``) is left as it is (``None``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import libcst as cst
import torch
from dycl.rewriter.walk import descendants, target_names

#: comprehensions that build a sequence (a dict comprehension keeps host keys)
_SEQUENCE_COMPS = (cst.GeneratorExp, cst.ListComp, cst.SetComp)


def _tensors(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(v, torch.Tensor) for v in value)


def iterates_tensors(comp: cst.BaseComp, evaluate: Callable[[cst.BaseExpression], Any]) -> bool:
    """Whether a ``for`` of ``comp`` iterates a tensor or a list of tensors (its outer iterable:
    the inner ones read the loop variables, which the example's state does not bind)."""
    return _tensors(evaluate(comp.for_in.iter))


def as_tensor_list(comp: cst.BaseComp, evaluate: Callable[[cst.BaseExpression], Any]) -> cst.ListComp | None:
    """``comp`` as the list comprehension a sub-DNN computes, where it is one (see the module
    note: a sequence of tensors; the caller has checked that building it reads no tensor
    value, so its ``if``s test shapes or types only); None otherwise."""
    if not isinstance(comp, _SEQUENCE_COMPS):
        return None
    listed = elements(comp)
    value = evaluate(listed)
    if not (isinstance(value, list) and value and all(isinstance(v, torch.Tensor) for v in value)):
        return None
    return listed


def elements(comp: cst.BaseComp) -> cst.ListComp:
    """``comp`` as a list comprehension computing the same elements (a dict's as pairs)."""
    if isinstance(comp, cst.DictComp):
        return cst.ListComp(elt=cst.Tuple([cst.Element(comp.key), cst.Element(comp.value)]), for_in=comp.for_in)
    return cst.ListComp(elt=comp.elt, for_in=comp.for_in)


def reads_data(comp: cst.BaseComp, decisions: Callable[[cst.BaseExpression], int]) -> bool:
    """Whether building ``comp``'s elements reads a tensor's value (``decisions``: how many
    data-dependent reads evaluating an expression on the example makes; ``hcfg.decisions``)."""
    return decisions(elements(comp)) > 0


#: what a loop variable of a host comprehension over tensors may be read for (``hcfg.portable``)
_METADATA_ATTRIBUTES = frozenset({"shape", "ndim"})
_METADATA_METHODS = frozenset({"size", "dim", "ndimension", "numel", "nelement"})


def rows_iterable(iterable: cst.BaseExpression) -> cst.BaseExpression:
    """``t`` for ``t.unbind()``, ``t.unbind(0)`` and ``t.unbind(dim=0)`` (iterating a tensor gives
    its rows, as a numpy array does); ``iterable`` otherwise. The caller checks ``t`` is a tensor."""
    if not (isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Attribute)
            and iterable.func.attr.value == "unbind"):
        return iterable
    args = iterable.args
    if not args:
        return iterable.func.value
    if len(args) == 1 and isinstance(args[0].value, cst.Integer) and args[0].value.value == "0" and (
            args[0].keyword is None or args[0].keyword.value == "dim"):
        return iterable.func.value
    return iterable


def loop_names(comp: cst.BaseComp) -> set[str]:
    """The names the (outer) ``for`` of ``comp`` binds."""
    return set(target_names(comp.for_in.target))


def foreign_use(comp: cst.BaseComp) -> cst.CSTNode | None:
    """The first read of a loop variable of ``comp`` that is not for its metadata (see the module
    note), or a second ``for``; None where there is none."""
    if comp.for_in.inner_for_in is not None:
        return comp.for_in.inner_for_in
    names = loop_names(comp)
    parts = [elements(comp).elt, *(test.test for test in comp.for_in.ifs)]
    nodes = [node for part in parts for node in descendants(part)]
    allowed: set[int] = set()
    for node in nodes:
        if isinstance(node, cst.Attribute) and node.attr.value in _METADATA_ATTRIBUTES:
            allowed.add(id(node.value))
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and (
                node.func.attr.value in _METADATA_METHODS):
            allowed.add(id(node.func.value))
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "len" and (
                len(node.args) == 1):
            allowed.add(id(node.args[0].value))
    return next((node for node in nodes
                 if isinstance(node, cst.Name) and node.value in names and id(node) not in allowed), None)


def host_form(comp: cst.BaseComp, name: str) -> cst.BaseExpression:
    """What the host keeps of ``comp`` once the sub-DNN computes its elements as the list ``name``."""
    if isinstance(comp, cst.ListComp):
        return cst.Name(name)
    if isinstance(comp, cst.SetComp):
        return cst.Call(cst.Name("set"), [cst.Arg(cst.Name(name))])
    return cst.Call(cst.Name("iter"), [cst.Arg(cst.Name(name))])  # a generator: consumed once


__all__ = ["as_tensor_list", "elements", "foreign_use", "host_form", "iterates_tensors", "loop_names", "reads_data",
           "rows_iterable"]
