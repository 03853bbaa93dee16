"""Max pooling made NaN where a window holds a NaN and ``-inf`` where it holds nothing else, by one
average pooling of a bounded copy of the input (cheaper than pooling two 0/1 flag tensors).

For a plain, non-dilated ``MaxPool`` of ``x`` (``values``)::

    h = Where(x == -inf, -2, Sign(x))          # NaN stays NaN; every other element in {-1, 0, 1}
    a = AveragePool(h, <the pool's kernel, strides, pads, ceil_mode>, count_include_pad=0)
    Where(a == -2, -inf, values + 0 * a)

(ONNX ``Sign`` keeps NaN, unlike eager's ``sign``; it is cheaper than the ``Tanh`` that bounds
values as well.) ``a`` is NaN exactly where the window holds a NaN (``h`` is finite elsewhere, so
no ``inf - inf`` arises), ``-2`` exactly where every element of the window is ``-inf`` (the padding is not
counted; any other element is ``>= -1``, so the average is ``>= -2 + 1/n``, which float32 tells
from -2 for every window of fewer than 2**20 elements), and finite otherwise, where
``values + 0 * a`` is ``values`` (the sign of a zero aside). The claims were checked on ONNX
Runtime 1.31 for 1-, 2- and 3-d pooling with padding, strides and ``ceil_mode``
(``tests/compile/test_pool_average_repair.py``). Cost: ``benchmarks/pool_repair.py``.

Assumes: ``values`` is the output of torch's translation (``onnx::MaxPool`` of ``x`` with its
attributes). Guarantees: returns a value of ``values``' type and shape, or None where the pooling is
not such a node (dilated, another producer, a window too large) or not float32 (ONNX Runtime's
CPU ``AveragePool`` has no float64 kernel): the caller keeps its other repair.
"""

from __future__ import annotations

import math
from typing import Any

import torch

_LARGEST_WINDOW = 2 ** 20


def _ints(node, name: str) -> list[int]:
    return getattr(node, "is")(name)  # the ints attribute's getter is named ``is``


def average_attributes(x, values, count_include_pad: int) -> dict[str, Any] | None:
    """The ``AveragePool`` attributes of the ``MaxPool`` that made ``values`` from ``x``; None where
    ``values`` is not a plain, non-dilated ``MaxPool`` of ``x``."""
    node = values.node()
    if node.kind() != "onnx::MaxPool" or next(node.inputs()).unique() != x.unique():
        return None
    if node.hasAttribute("dilations") and any(d != 1 for d in _ints(node, "dilations")):
        return None
    attributes = {"kernel_shape_i": _ints(node, "kernel_shape"), "count_include_pad_i": count_include_pad,
                  "ceil_mode_i": node.i("ceil_mode") if node.hasAttribute("ceil_mode") else 0}
    for name in ("strides", "pads"):
        if node.hasAttribute(name):
            attributes[f"{name}_i"] = _ints(node, name)
    return attributes


def _constant(g, number: float, dtype: torch.dtype):
    return g.op("Constant", value_t=torch.tensor(number, dtype=dtype))


def minus_inf_and_nan_by_average(g, x, values, dtype: torch.dtype | None):
    """``values`` repaired as the module's docstring says; None where that form does not apply."""
    attributes = average_attributes(x, values, count_include_pad=0)
    if attributes is None or dtype != torch.float32:
        return None
    if math.prod(attributes["kernel_shape_i"]) >= _LARGEST_WINDOW:
        return None
    minus_two = _constant(g, -2.0, dtype)
    bounded = g.op("Where", g.op("IsInf", x, detect_positive_i=0), minus_two, g.op("Sign", x))
    average = g.op("AveragePool", bounded, **attributes)
    kept = g.op("Add", values, g.op("Mul", average, _constant(g, 0.0, dtype)))
    return g.op("Where", g.op("Equal", average, minus_two), _constant(g, float("-inf"), dtype), kept)


__all__ = ["average_attributes", "minus_inf_and_nan_by_average"]
