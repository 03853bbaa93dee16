"""``len(t)`` of a tensor in a sub-DNN statement, written ``t.size(0)``.

A sub-DNN's statements are exported by tracing. ``len(t)`` hands the tracer a plain
Python int (``Tensor.__len__`` returns one, and ``len`` converts whatever it gets to
one), so ``torch.zeros([len(x), 10])`` would pin the batch to the example's size (the
export then specialises the graph, with a ``SpecialisationWarning``). ``t.size(0)`` is
recorded by the tracer as a size of ``t``: where that dim is symbolic, the graph keeps
it symbolic and serves every size.

Assumed: ``is_tensor(expr)`` says whether ``expr`` is a tensor of rank >= 1 on the
example (its type is the same on every call that reaches the statement: ``hcfg.state``).
Guaranteed: only ``len(<expr>)`` calls with one positional argument, a name, attribute
or subscript (no operator whose precedence ``.size`` would change, no call), for which
``is_tensor`` holds change, each to ``<expr>.size(0)``, which torch computes equal to it;
a node with no such call is returned as it is (the same object).
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst
from dycl.rewriter.walk import descendants, map_children

_ATOMS = (cst.Name, cst.Attribute, cst.Subscript)  # no call: telling its type would run it again


def _is_len_call(node: cst.CSTNode) -> bool:
    return (isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "len"
            and len(node.args) == 1 and node.args[0].keyword is None and not node.args[0].star
            and isinstance(node.args[0].value, _ATOMS))


def traced_lengths(node: cst.CSTNode, is_tensor: Callable[[cst.BaseExpression], bool]) -> cst.CSTNode:
    """``node`` with ``len(t)`` of every tensor ``t`` written ``t.size(0)`` (see the module note)."""
    if not any(_is_len_call(n) for n in descendants(node)):
        return node

    def visit(current: cst.CSTNode) -> cst.CSTNode:
        current = map_children(current, visit)
        if _is_len_call(current) and is_tensor(current.args[0].value):
            size = cst.Attribute(current.args[0].value, cst.Name("size"))
            return cst.Call(size, [cst.Arg(cst.Integer("0"))])
        return current

    return visit(node)


__all__ = ["traced_lengths"]
