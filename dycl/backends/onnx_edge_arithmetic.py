"""Arithmetic translations that ONNX Runtime (1.31) computes unlike eager at edge values, repaired.

- ``remainder`` of floats (``x % y``): torch's translation ``x - floor(x / y) * y`` is NaN for an
  infinite ``y`` where eager's (C ``fmod``, then ``+ y`` where the signs differ) gives ``x`` or
  ``±inf``. Here exactly eager's: ``r = Mod(x, y, fmod=1)``; ``r + y`` where ``r != 0`` and the
  signs of ``r`` and ``y`` differ.
- ``fmod`` of floats: ORT's ``Mod(fmod=1)`` gave 0 where C's ``fmod`` is NaN (``x`` infinite,
  ``y`` zero); here NaN there.
- ``fmod`` of int64: ORT's ``Mod(fmod=1)`` goes through float64 and is wrong beyond 2**53. Here
  ``x - Div(x, y) * y`` (``Div`` of integers truncates, as C does: exact).
- ``sign`` of int64: ORT's ``Sign`` compares in 32 bits (``sign(2**31)`` was -1). Here
  ``(x > 0) - (x < 0)``.
- ``relu`` of integers: ORT has no integer ``Relu`` (a load failure). Here ``Where(x < 0, 0, x)``.
- ``pow(x, 0.5)``: eager computes ``sqrt`` (``sqrt(-inf)`` is NaN); ORT's ``Pow(-inf, 0.5)`` is
  ``inf``. Here a constant exponent 0.5 is ``Sqrt``.
- ``softplus(x, beta, threshold)``: eager is ``x`` where ``beta * x > threshold``; the
  translation's ``Softplus(beta * x) / beta`` overflowed there (``FLT_MAX`` gave ``inf``).
- ``hardswish``: eager's ``x * min(max(x + 3, 0), 6) / 6`` overflows to ``inf`` above
  ``FLT_MAX / 6`` and is NaN at ``-inf``; ORT's ``HardSwish`` gave ``FLT_MAX`` and 0.
- ``logsigmoid``: eager's ``min(x, 0) - log1p(exp(-|x|))`` is ``x`` below -20 in float32 (-40 in
  float64); the translation's ``log(sigmoid(x))`` gave ``-inf`` below -104 (-745).

- ``atan2(y, x)``: the translation's ``atan(y / x)`` with quadrant fixes gave NaN at ``inf / inf``
  and lost the sign of zeros; here C's values where ``x`` or ``y`` is infinite or zero
  (``±pi/4``, ``±3pi/4``, ``±pi/2``, ``±0``, ``±pi``, with ``-0.0`` as negative).
- ``prod`` of int64: ORT's ``ReduceProd`` goes through float64 (wrong beyond 2**53, saturating
  where eager wraps): refused as an exporter error naming the operator.

Other element types and arguments that are not constants keep torch's translation.

Assumes: arguments as the TorchScript exporter passes them (``onnx_graph_values``).
Guarantees: the result's type and shape are torch's translation's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from dycl.backends.onnx_graph_values import SymbolicUnsupported, constant, is_none, rank, scalar_type

Symbolic = Callable[..., Any]
_FLOATING = frozenset({"Float", "Double", "Half", "BFloat16"})
_INTEGERS = frozenset({"Long", "Int", "Short", "Char", "Byte"})
_FLT_MAX = float(torch.finfo(torch.float32).max)


def _like(g, number: float, value):
    return g.op("CastLike", g.op("Constant", value_t=torch.tensor(number)), value)


def _float32(g, number: float):
    return g.op("Constant", value_t=torch.tensor(number, dtype=torch.float32))


def _float_fmod(g, x, y):
    """C's ``fmod``: ORT's ``Mod(fmod=1)``, NaN where C's is (an infinite ``x``, a zero ``y``, a NaN),
    which ORT gave as 0. (Eager's own result for a subnormal ``y`` depends on where the element
    falls in its vectorised kernel: ``fmod(1.45, 3e-39)`` is 0 or NaN; C's is kept.)"""
    undefined = g.op("Or", g.op("IsInf", x), g.op("Equal", y, _like(g, 0.0, y)))
    undefined = g.op("Or", undefined, g.op("Or", g.op("IsNaN", x), g.op("IsNaN", y)))
    return g.op("Where", undefined, _like(g, float("nan"), x), g.op("Mod", x, y, fmod_i=1))


_WIDTH = {"Half": 0, "BFloat16": 0, "Float": 1, "Double": 2}
_ONNX_FLOATS = {"Half": 10, "BFloat16": 16, "Float": 1, "Double": 11}


def _float_operands(g, x, y):
    """``(x, y)`` cast to eager's result type where that is floating and ``x`` is floating: ``x``'s,
    or a floating tensor ``y``'s of rank >= 1 where wider; None otherwise (half with bfloat16 too)."""
    kind, other = scalar_type(x), scalar_type(y)
    if kind not in _FLOATING or other not in _FLOATING | _INTEGERS:
        return None
    if other in _FLOATING and other != kind and rank(y) != 0:  # an unknown rank: as a tensor
        if _WIDTH[other] == _WIDTH[kind]:
            return None
        kind = max(kind, other, key=_WIDTH.__getitem__)
    return g.op("Cast", x, to_i=_ONNX_FLOATS[kind]), g.op("Cast", y, to_i=_ONNX_FLOATS[kind])


def remainder_like(original: Symbolic) -> Symbolic:
    """``aten::remainder`` of a floating ``x`` (both in eager's result type)."""

    def symbolic(g, self, other):
        operands = _float_operands(g, self, other)
        if operands is None:
            return original(g, self, other)
        self, other = operands
        rest = _float_fmod(g, self, other)
        zero = _like(g, 0.0, self)
        differ = g.op("Xor", g.op("Less", rest, zero), g.op("Less", other, zero))
        shift = g.op("And", g.op("Not", g.op("Equal", rest, zero)), differ)
        return g.op("Where", shift, g.op("Add", rest, other), rest)

    return symbolic


def fmod_like(original: Symbolic) -> Symbolic:
    """``aten::fmod`` of two int64 values, or of a floating ``x``."""

    def symbolic(g, self, other):
        operands = _float_operands(g, self, other)
        if operands is not None:
            return _float_fmod(g, *operands)
        if scalar_type(self) != "Long" or scalar_type(other) not in _INTEGERS:
            return original(g, self, other)
        other = g.op("CastLike", other, self)
        return g.op("Sub", self, g.op("Mul", g.op("Div", self, other), other))

    return symbolic


def int_sign_like(original: Symbolic) -> Symbolic:
    """``aten::sign`` of int64 (floating inputs: ``original``, ``onnx_nan_reductions.sign_like``)."""

    def symbolic(g, self):
        if scalar_type(self) != "Long":
            return original(g, self)
        zero = _like(g, 0, self)
        above = g.op("Cast", g.op("Greater", self, zero), to_i=7)
        return g.op("Sub", above, g.op("Cast", g.op("Less", self, zero), to_i=7))

    return symbolic


def relu_like(original: Symbolic) -> Symbolic:
    """``aten::relu`` of integers."""

    def symbolic(g, self):
        if scalar_type(self) not in _INTEGERS:
            return original(g, self)
        zero = _like(g, 0, self)
        return g.op("Where", g.op("Less", self, zero), zero, self)

    return symbolic


def pow_like(original: Symbolic) -> Symbolic:
    """``aten::pow`` with the constant exponent 0.5 of a floating ``x``."""

    def symbolic(g, self, exponent):
        if scalar_type(self) in _FLOATING and constant(exponent) == 0.5:
            return g.op("Sqrt", self)
        return original(g, self, exponent)

    return symbolic


def softplus_like(original: Symbolic) -> Symbolic:
    """``aten::softplus(x, beta, threshold)``: ``x`` itself where ``beta * x > threshold``."""

    def symbolic(g, self, beta, threshold):
        result = original(g, self, beta, threshold)
        b, t = constant(beta), constant(threshold)
        if scalar_type(self) not in _FLOATING or not all(isinstance(v, (int, float)) for v in (b, t)):
            return result
        linear = g.op("Greater", g.op("Mul", self, _like(g, float(b), self)), _like(g, float(t), self))
        return g.op("Where", linear, self, result)

    return symbolic


def hardswish_like(original: Symbolic) -> Symbolic:
    """``aten::hardswish`` of float32: ``inf`` above ``FLT_MAX / 6``, NaN at ``-inf``."""

    def symbolic(g, self):
        result = original(g, self)
        if scalar_type(self) != "Float":
            return result
        result = g.op("Where", g.op("Greater", self, _float32(g, _FLT_MAX / 6)), _float32(g, float("inf")), result)
        return g.op("Where", g.op("IsInf", self, detect_positive_i=0), _float32(g, float("nan")), result)

    return symbolic


#: below these, eager's ``logsigmoid(x)`` is ``x`` itself (``exp(x)`` under half an ulp of ``x``)
_LOGSIGMOID_LINEAR_BELOW = {"Float": -20.0, "Double": -40.0}


def logsigmoid_like(original: Symbolic) -> Symbolic:
    """``aten::log_sigmoid`` of float32 (float64): ``x`` itself below -20 (-40)."""

    def symbolic(g, self):
        result = original(g, self)
        below = _LOGSIGMOID_LINEAR_BELOW.get(scalar_type(self))
        if below is None:
            return result
        return g.op("Where", g.op("Less", self, _like(g, below, self)), self, result)

    return symbolic


def _negative(g, v):
    """``v < 0``, counting -0.0 (whose reciprocal is -inf) as negative."""
    zero = _like(g, 0.0, v)
    minus_zero = g.op("And", g.op("Equal", v, zero), g.op("Less", g.op("Reciprocal", v), zero))
    return g.op("Or", g.op("Less", v, zero), minus_zero)


def atan2_like(original: Symbolic) -> Symbolic:
    """``aten::atan2(y, x)`` of floats of one type: C's values where ``x`` or ``y`` is infinite or zero."""

    def symbolic(g, self, other):
        result = original(g, self, other)
        if scalar_type(self) not in _FLOATING or scalar_type(other) != scalar_type(self):
            return result
        y, x, zero, pi = self, other, _like(g, 0.0, self), math.pi
        y_inf, x_inf = g.op("IsInf", y), g.op("IsInf", x)
        x_negative = _negative(g, x)

        def pick(condition, when_negative_x: float, otherwise: float):
            return condition, g.op("Where", x_negative, _like(g, when_negative_x, x), _like(g, otherwise, x))

        cases = [pick(g.op("And", y_inf, x_inf), 3 * pi / 4, pi / 4), pick(y_inf, pi / 2, pi / 2),
                 pick(x_inf, pi, 0.0), pick(g.op("Equal", y, zero), pi, 0.0),
                 pick(g.op("Equal", x, zero), pi / 2, pi / 2)]  # the first that holds decides
        base, special = cases[-1][1], cases[-1][0]
        for condition, value in reversed(cases[:-1]):
            base, special = g.op("Where", condition, value, base), g.op("Or", special, condition)
        signed = g.op("Where", _negative(g, y), g.op("Neg", base), base)
        special = g.op("And", special, g.op("Not", g.op("Or", g.op("IsNaN", x), g.op("IsNaN", y))))
        return g.op("Where", special, signed, result)

    return symbolic


def prod_like(original: Symbolic) -> Symbolic:
    """``aten::prod`` of int64 (without a ``dtype``): refused (ORT's ``ReduceProd`` of int64 goes through
    float64: ``prod([2**53 + 1, 1])`` was ``2**53``, and it saturates where eager wraps)."""

    def symbolic(g, self, *args):
        if scalar_type(self) == "Long" and (not args or is_none(args[-1])):
            raise SymbolicUnsupported("prod", "an int64 product (ONNX Runtime computes it in float64); "
                                      "multiply the factors with `*` instead")
        return original(g, self, *args)

    return symbolic


WRAPPERS: dict[str, Callable[[Symbolic], Symbolic]] = {
    "aten::remainder": remainder_like, "aten::fmod": fmod_like, "aten::relu": relu_like, "aten::pow": pow_like,
    "aten::softplus": softplus_like, "aten::hardswish": hardswish_like, "aten::log_sigmoid": logsigmoid_like,
    "aten::prod": prod_like, "aten::atan2": atan2_like,
}
#: composed with ``onnx_nan_reductions``' wrapper of the same operator
SIGN_WRAPPER = int_sign_like

__all__ = ["SIGN_WRAPPER", "WRAPPERS"]
