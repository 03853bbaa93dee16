"""Comprehensions over tensors in host code: ``if any(r.sum() > 1 for r in x.unbind(0)):``.

The host runs on numpy arrays, so a comprehension left in host code that iterates a
tensor (``x.unbind(0)``, ``x.split(2)``, a list of tensors) would call torch's methods on
numpy arrays. Such a comprehension is placed in one of two ways:

- its tensor work moves to the preceding sub-DNN: a comprehension with one ``for`` and no
  ``if`` whose elements are tensors becomes ``t = [element for r in iterable]`` there, and
  the host reduces the list it returns (``any(t)``, ``sum(t)``, ``t`` itself). Iterating
  a tensor has no data-dependent decision; its length is the dim's, which the export
  checks like every other shape;
- otherwise (an ``if`` filter on data, elements that are Python numbers from ``.item()``,
  nested ``for``s) it is refused at the user's line with ``UnsupportedError``.

Assumes: ``evaluate`` gives an expression's value on the example's state, or a non-tensor
for one it could not evaluate. Guarantees: a comprehension whose iterable is no tensor
and no list of tensors (``[x * i for i in range(n)]``) is left as it is (``None``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import libcst as cst
import torch

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
    note: one ``for``, no ``if``, tensor elements); None otherwise."""
    if not isinstance(comp, _SEQUENCE_COMPS) or comp.for_in.inner_for_in is not None or comp.for_in.ifs:
        return None
    listed = cst.ListComp(elt=comp.elt, for_in=comp.for_in)
    value = evaluate(listed)
    if not (isinstance(value, list) and value and all(isinstance(v, torch.Tensor) for v in value)):
        return None
    return listed


def host_form(comp: cst.BaseComp, name: str) -> cst.BaseExpression:
    """What the host keeps of ``comp`` once the sub-DNN computes its elements as the list ``name``."""
    if isinstance(comp, cst.ListComp):
        return cst.Name(name)
    if isinstance(comp, cst.SetComp):
        return cst.Call(cst.Name("set"), [cst.Arg(cst.Name(name))])
    return cst.Call(cst.Name("iter"), [cst.Arg(cst.Name(name))])  # a generator: consumed once


__all__ = ["as_tensor_list", "host_form", "iterates_tensors"]
