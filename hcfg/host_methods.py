"""Tensor methods the host evaluates on numpy arrays: translated, kept, or refused.

The host holds numpy arrays where the model had tensors. A method call on a tensor
that is left in host code (a condition, a returned expression the example could not
evaluate) runs on an array, where it either has the same meaning, has another name,
or does not exist. This pass decides, per call on a value that is a tensor:

- ``t.amax(d)``/``t.amin(d)`` (``dim=``, ``keepdim=``) become ``t.max(axis=d, keepdims=k)``
  / ``t.min(...)``, numpy's spelling of the same reduction (both raise on an empty dim);
- ``t.max()``/``t.min()``/``t.sum()``/``t.any()``/``t.all()``/``t.item()``/``t.tolist()``
  with no argument are kept: numpy computes the same value;
- anything else is refused (``refuse(method)``): a method numpy arrays lack would be an
  ``AttributeError`` at run time, and one numpy has with other semantics
  (``t.max(0)`` is ``(values, indices)`` in torch) would be a silent wrong answer.

Assumed: ``is_tensor(expr)`` says whether ``expr`` is a tensor on the example, and the
metadata calls of ``hcfg.portable`` were rewritten before (their forms are not tensor calls).
Guaranteed: a call this pass leaves on a tensor computes on an array what torch computes.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

_SAME_WITHOUT_ARGUMENTS = frozenset({"max", "min", "sum", "any", "all", "item", "tolist"})
_RENAMED_REDUCTIONS = {"amax": "max", "amin": "min"}
_KEYWORDS = {"dim": "axis", "keepdim": "keepdims"}
# the forms hcfg.portable writes (t.reshape(-1) inside len(...)) are numpy's own
_PORTABLE_FORMS = frozenset({"reshape"})


def host_tensor_method(call: cst.Call, is_tensor: Callable[[cst.BaseExpression], bool],
                       refuse: Callable[[str], None]) -> cst.BaseExpression:
    """``call`` as the host runs it on arrays (see the module note); ``refuse(method)`` raises."""
    if not isinstance(call.func, cst.Attribute) or not is_tensor(call.func.value):
        return call
    method = call.func.attr.value
    if method in _PORTABLE_FORMS:
        return call
    if method in _SAME_WITHOUT_ARGUMENTS and not call.args:
        return call
    if method in _RENAMED_REDUCTIONS:
        translated = _reduction(call, _RENAMED_REDUCTIONS[method])
        if translated is not None:
            return translated
    refuse(method)
    return call


def _reduction(call: cst.Call, numpy_name: str) -> cst.Call | None:
    """``t.amax(d, keepdim=k)`` as ``t.max(axis=d, keepdims=k)``; None for a form not known."""
    names = ["dim", "keepdim"]
    args: list[cst.Arg] = []
    for position, arg in enumerate(call.args):
        if arg.star:
            return None
        keyword = arg.keyword.value if arg.keyword is not None else (names[position] if position < 2 else None)
        if keyword not in _KEYWORDS:
            return None
        args.append(cst.Arg(arg.value, keyword=cst.Name(_KEYWORDS[keyword]),
                            equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))))
    func = call.func.with_changes(attr=cst.Name(numpy_name))
    return cst.Call(func, args)


__all__ = ["host_tensor_method"]
