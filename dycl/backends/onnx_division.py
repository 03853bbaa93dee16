"""Rounded division as eager computes it: ``a // b``, ``torch.floor_divide``, and
``torch.div(a, b, rounding_mode="floor" | "trunc")``.

- torch's translation of ``aten::floor_divide`` still truncates (its pre-1.13 meaning):
  ``-7 // 3`` gave -2 (eager -3), ``-1.5 // 1.0`` gave -1 (eager -2), silently.
- For floats, even flooring ``a / b`` is not eager's answer: eager computes
  ``(a - fmod(a, b)) / b`` and rounds that (ATen's ``div_floor_floating``, Python's
  float ``//``), so ``1.4 // 0.7`` is 1 in eager and ``floor(1.4 / 0.7) = 2``.
- ``rounding_mode="trunc"`` on floats went through an int64 cast: NaN, inf and values
  beyond 2**63 came back as -9.2e18.

Here: integers -- the truncated ``Div`` less one where the remainder is nonzero and its
sign differs from the divisor's; floats -- ATen's ``div_floor_floating`` step by step
(``a / b`` where ``b == 0``), and ``trunc(a / b)`` as ``Ceil``/``Floor`` by sign.
Floating operands of two different types keep torch's translation, except for the
floor of an int where this module answers ``Floor(Div)``.

Assumes: arguments as the TorchScript exporter passes them (``onnx_graph_values``).
Guarantees: the result has the type torch's translation gives.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from dycl.backends.onnx_graph_values import SymbolicUnsupported, constant, rank, scalar_type

_FLOATING = frozenset({"Float", "Double", "Half", "BFloat16"})

Symbolic = Callable[..., Any]


def _like(g, number: float, value):
    return g.op("CastLike", g.op("Constant", value_t=torch.tensor(number)), value)


def _float_operands(g, self, other):
    """``(self, other)`` of one floating type, or None where they are two tensors of two types."""
    kinds = (scalar_type(self), scalar_type(other))
    if kinds[0] == kinds[1]:
        return self, other
    if kinds[0] in _FLOATING and (rank(other) == 0 or kinds[1] not in _FLOATING):
        return self, g.op("CastLike", other, self)
    if kinds[1] in _FLOATING and (rank(self) == 0 or kinds[0] not in _FLOATING):
        return g.op("CastLike", self, other), other
    return None


def _floor_floats(g, a, b):
    mod = g.op("Mod", a, b, fmod_i=1)
    quotient = g.op("Div", g.op("Sub", a, mod), b)
    zero = _like(g, 0.0, quotient)
    lower = g.op("And", g.op("Not", g.op("Equal", mod, zero)),
                 g.op("Xor", g.op("Less", b, zero), g.op("Less", mod, zero)))
    quotient = g.op("Where", lower, g.op("Sub", quotient, _like(g, 1.0, quotient)), quotient)
    floored = g.op("Floor", quotient)
    floored = g.op("Where", g.op("Greater", g.op("Sub", quotient, floored), _like(g, 0.5, quotient)),
                   g.op("Add", floored, _like(g, 1.0, quotient)), floored)
    exact = g.op("Div", a, b)
    signed_zero = g.op("Mul", exact, zero)  # copysign(0, a / b)
    floored = g.op("Where", g.op("Equal", quotient, zero), signed_zero, floored)
    return g.op("Where", g.op("Equal", b, zero), exact, floored)


def _floor_ints(g, a, b):
    quotient = g.op("Div", a, b)  # integer Div truncates towards zero
    remainder = g.op("Sub", a, g.op("Mul", quotient, b))
    inexact = g.op("Not", g.op("Equal", remainder, g.op("Sub", remainder, remainder)))
    signs_differ = g.op("Xor", g.op("Less", remainder, g.op("Sub", remainder, remainder)),
                        g.op("Less", b, g.op("Sub", b, b)))
    lowered = g.op("Sub", quotient, g.op("Constant", value_t=torch.tensor(1, dtype=torch.int64)))
    return g.op("Where", g.op("And", inexact, signs_differ), lowered, quotient)


def floor_divide(g, self, other):
    """``aten::floor_divide``: eager's floor division of ints and of floats."""
    kinds = (scalar_type(self), scalar_type(other))
    if None in kinds or "Bool" in kinds:
        raise SymbolicUnsupported("floor_divide", "operands of an unknown or bool element type")
    if kinds[0] not in _FLOATING and kinds[1] not in _FLOATING:
        return _floor_ints(g, self, other)
    operands = _float_operands(g, self, other)
    return _floor_floats(g, *operands) if operands else g.op("Floor", g.op("Div", self, other))


def _rounding_mode(value: Any) -> Any:
    """The string a constant argument holds (an ``onnx::Constant`` keeps it as attribute ``s``)."""
    if isinstance(value, torch._C.Value) and value.node().kind() == "onnx::Constant" and (
            value.node().kindOf("value") == "s"):
        return value.node().s("value")
    return constant(value)


def div_like(original: Symbolic) -> Symbolic:
    """``aten::div`` with ``rounding_mode``: floats (and floor of ints) as eager rounds them."""

    def symbolic(g, self, other, *args):
        mode = _rounding_mode(args[0]) if args else None
        if mode not in ("floor", "trunc"):
            return original(g, self, other, *args)
        kinds = (scalar_type(self), scalar_type(other))
        if mode == "floor" and None not in kinds and not set(kinds) & _FLOATING and "Bool" not in kinds:
            return _floor_ints(g, self, other)
        operands = _float_operands(g, self, other) if set(kinds) & _FLOATING else None
        if operands is None:
            return original(g, self, other, *args)
        if mode == "floor":
            return _floor_floats(g, *operands)
        quotient = g.op("Div", *operands)
        return g.op("Where", g.op("Less", quotient, _like(g, 0.0, quotient)), g.op("Ceil", quotient),
                    g.op("Floor", quotient))

    return symbolic


WRAPPERS: dict[str, Callable[[Symbolic], Symbolic]] = {"aten::div": div_like}

__all__ = ["WRAPPERS", "floor_divide"]
