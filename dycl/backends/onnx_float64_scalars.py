"""Arithmetic and comparisons of 0-d float64 tensors, kept in float64.

The TorchScript exporter's scalar type analysis treats every 0-d tensor operand of ``Add``,
``Sub``, ``Mul``, ``Div``, ``Pow``, ``Mod`` and the comparisons as a Python scalar, whose float is
the default dtype: ``x.sum() > 1.0`` of a float64 ``x`` became ``Cast(to=FLOAT)`` then
``Greater``, so ``1 + 1e-12 > 1`` was False and a float64 subnormal compared equal to 0 --
a branch on such a test took another path than eager, silently, and ``x.sum() + 1e-12`` came back
as float32.

Here, where every tensor operand is 0-d and one that is computed (not a constant) is float64, the
0-d operands are made 1-d (``Unsqueeze``) for torch's translation -- a 1-d float64 tensor keeps its
type through the analysis, and the other operand is promoted to it, as eager promotes 0-d tensors
among themselves -- and the result is made 0-d again (``Squeeze``). A 0-d float32 (or integer)
operand with a Python float keeps torch's translation (the constant's ``Double`` is the Python
scalar's, not a tensor's).

Assumes: arguments as the TorchScript exporter passes them (``onnx_graph_values``); the operand
ranks are known where they are 0-d. Guarantees: the result has eager's type and shape.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from dycl.backends.onnx_graph_values import rank, scalar_type

Symbolic = Callable[..., Any]

#: the ATen operators the scalar type analysis casts the operands of (binary, tensor first)
OPERATORS = ("aten::add", "aten::sub", "aten::rsub", "aten::mul", "aten::div", "aten::true_divide", "aten::pow",
             "aten::remainder", "aten::fmod", "aten::gt", "aten::lt", "aten::ge", "aten::le", "aten::eq", "aten::ne")
_CONSTANTS = ("prim::Constant", "onnx::Constant")


def _computed_double(value) -> bool:
    return isinstance(value, torch._C.Value) and value.node().kind() not in _CONSTANTS \
        and scalar_type(value) == "Double" and rank(value) == 0


def _zero_d(value) -> bool:
    return isinstance(value, torch._C.Value) and rank(value) == 0


def keep_float64(symbolic: Symbolic) -> Symbolic:
    """``symbolic`` of a binary operator, in float64 where its 0-d operands are (see the module)."""

    def wrapped(g, self, other, *args):
        if not (_zero_d(self) and _zero_d(other) and (_computed_double(self) or _computed_double(other))):
            return symbolic(g, self, other, *args)
        axes = g.op("Constant", value_t=torch.tensor([0]))
        result = symbolic(g, g.op("Unsqueeze", self, axes), g.op("Unsqueeze", other, axes), *args)
        return g.op("Squeeze", result, axes)

    return wrapped


def with_float64_scalars(symbolics: dict[str, Symbolic], registry: Any, opset: int) -> dict[str, Symbolic]:
    """``symbolics`` with each of ``OPERATORS`` (dycl's translation, else torch's for ``opset``) wrapped
    by ``keep_float64``."""
    out = dict(symbolics)
    for name in OPERATORS:
        group = registry.get_function_group(name)
        base = out.get(name) or (group.get(opset) if group is not None else None)
        if base is not None:
            out[name] = keep_float64(base)
    return out


__all__ = ["OPERATORS", "keep_float64", "with_float64_scalars"]
