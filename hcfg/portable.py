"""Host expressions that read tensor metadata, written so numpy arrays answer them.

The host holds numpy arrays where the model had tensors, and the two disagree
on metadata: ``t.size(0)`` is a method on a tensor but ``a.size`` is the
element count of an array. A shape-dependent host test (``if x.size(0) == 1:``)
must be evaluated by the host from the arrays it holds, so every metadata call
on a value that is a tensor on the example is rewritten to a form both types
answer alike:

===========================  ==========================
``t.size()``                 ``tuple(t.shape)``
``t.size(i)``, ``t.size(dim=i)``  ``t.shape[i]``
``t.dim()``, ``t.ndimension()``   ``t.ndim``
``t.numel()``, ``t.nelement()``   ``len(t.reshape(-1))``
``t.numpy()``                 ``t`` (the host's value is that array already)
===========================  ==========================

``t.shape``, ``t.ndim`` and ``len(t)`` already mean the same on both.
Assumed: ``is_tensor(expr)`` says whether ``expr`` is a tensor on the example.
Guaranteed: only calls on tensors change, and the result is equal on both types (``t.numpy()``:
an array equal to the tensor's, whose memory the host does not share with any tensor).
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst
from dycl.hcfg.host_methods import host_tensor_method
from dycl.rewriter.walk import map_children

_RANK = {"dim", "ndimension"}
_COUNT = {"numel", "nelement"}


def portable_metadata(node: cst.CSTNode, is_tensor: Callable[[cst.BaseExpression], bool],
                      refuse: Callable[[str], None] | None = None) -> cst.CSTNode:
    """``node`` with metadata calls on tensors rewritten (see the module note); with ``refuse``,
    every other method call on a tensor goes through ``hcfg.host_methods``."""

    def visit(current: cst.CSTNode) -> cst.CSTNode:
        on_array = _called_on_numpy(current)  # numpy's own method in eager too: numpy's semantics are eager's
        current = map_children(current, visit)
        if not (isinstance(current, cst.Call) and isinstance(current.func, cst.Attribute)):
            return current
        method = current.func.attr.value
        receiver = current.func.value
        if method not in {"size", "numpy", *_RANK, *_COUNT} or not is_tensor(receiver):
            return current if refuse is None or on_array else host_tensor_method(current, is_tensor, refuse)
        if method == "numpy":
            return receiver if not current.args else current
        if method == "size":
            return _size(receiver, current.args) or current
        if current.args:
            return current
        if method in _RANK:
            return cst.Attribute(receiver, cst.Name("ndim"))
        minus_one = cst.UnaryOperation(cst.Minus(), cst.Integer("1"))
        flat = cst.Call(cst.Attribute(receiver, cst.Name("reshape")), [cst.Arg(minus_one)])
        return cst.Call(cst.Name("len"), [cst.Arg(flat)])

    return visit(node)


def _called_on_numpy(node: cst.CSTNode) -> bool:
    """Whether ``node`` is a method call on ``<expr>.numpy()`` (an array in eager as on the host)."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
        return False
    receiver = node.func.value
    return (isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute)
            and receiver.func.attr.value == "numpy" and not receiver.args)


def _size(receiver: cst.BaseExpression, args: tuple[cst.Arg, ...]) -> cst.BaseExpression | None:
    shape = cst.Attribute(receiver, cst.Name("shape"))
    if not args:
        return cst.Call(cst.Name("tuple"), [cst.Arg(shape)])
    if len(args) == 1 and (args[0].keyword is None or args[0].keyword.value == "dim") and not args[0].star:
        return cst.Subscript(shape, [cst.SubscriptElement(cst.Index(args[0].value))])
    return None


__all__ = ["portable_metadata"]
