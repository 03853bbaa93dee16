"""NaN-propagating ONNX translations of ``max``/``min`` reductions, ``argmax``/``argmin``
and max pooling.

Eager torch treats NaN as the extreme of every ``max``/``min`` reduction: ``x.max()``,
``x.max(dim)``, ``x.amax(dims)`` are NaN where a reduced element is, and ``argmax``/
``argmin`` (and the indices of ``max(dim)``/``min(dim)``) point at the first NaN. ONNX
Runtime's ``ReduceMax``/``ReduceMin``/``ArgMax``/``ArgMin`` compare with ``<``, so a NaN
is kept or skipped by position: ``[inf, nan].max()`` gave ``inf``, ``[nan, 1, -2, 3,
inf, -inf, 0, nan].max(-1)`` gave ``inf`` for the second row -- and a branch on that
value (``if x.max() > t``) took another path than eager, silently.

Max pooling (``F.max_pool1d/2d/3d``, ``nn.MaxPool*``, adaptive or not, with or without indices;
the indices of windows with NaN are ``onnx_pool_indices``') has the
same NaN problem, and one more without any NaN: ORT starts each window at the lowest
finite float, so a window of ``-inf`` only (a ``masked_fill(~mask, -inf)`` before
pooling) gave ``-3.4e38`` instead of ``-inf``. The pooled values here are NaN where the
window holds a NaN and ``-inf`` where it holds nothing else -- both found by one average
pooling of a bounded copy of the input (``onnx_pool_average``) for a plain ``MaxPool``, else
by running torch's own pooling translation, with the same attributes, on 0/1 flags of the input.

Sorting (``sort``, ``argsort``, ``topk``) puts NaN above ``+inf`` in eager; ORT's ``TopK``
placed it anywhere. Here torch's translation orders a key where NaN is the largest value
(float64, so that NaN > ``+inf`` > every float32 value stay distinct) and the values are
gathered back from the input by the indices. A float64 input has no wider key: it is sorted
twice (NaN as ``+inf``, then its NaN flags in that order, stably), which orders NaN above ``+inf``.

``sign`` of NaN is 0 in eager and NaN in ONNX; here 0 (and int64 ``sign`` by comparisons,
``onnx_edge_arithmetic``). ``any``/``all`` of a floating
tensor: torch's translation cast it to an integer first, so ``[0.3].any()`` was False
(and ``all`` an invalid model); here they reduce ``x != 0``.

Each translation here runs torch's own translation (``original``, the one registered
for the opset before dycl's override), then, for floating inputs only, replaces the
result where the reduced elements hold a NaN: the value by NaN, an index by the first
NaN's (``ArgMax`` of ``IsNaN``, which picks the first of equal maxima). ``argmax``/``argmin`` of
a float32/16 input instead run torch's translation on a float64 key where NaN is the extreme
(4 nodes, one ``ArgMax``; the sorts use the same key). Integer and bool
inputs, the elementwise ``max(x, y)``, and calls it cannot read (a dim that is not a
constant) keep torch's translation unchanged.

Assumes: the arguments are as the TorchScript exporter passes them to a symbolic
(``onnx_graph_values``); opset 17 (``ReduceMax`` takes ``axes`` as an attribute).
Guarantees: the result has the type and shape of torch's translation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from dycl.backends.onnx_edge_arithmetic import SIGN_WRAPPER as int_sign_like
from dycl.backends.onnx_graph_values import constant, is_none, rank, scalar_type
from dycl.backends.onnx_int64_bounds import pick
from dycl.backends.onnx_pool_average import average_attributes, minus_inf_and_nan_by_average
from dycl.backends.onnx_pool_indices import indices_like

_FLOATING = frozenset({"Float", "Double", "Half", "BFloat16"})
_ONNX_FLOAT = 1
_ONNX_DOUBLE = 11

Symbolic = Callable[..., Any]


def _nan_flags(g, x):
    return g.op("Cast", g.op("IsNaN", x), to_i=_ONNX_FLOAT)


def _any_nan(g, x, axes: list[int] | None, keepdims: bool):
    reduced = (g.op("ReduceMax", _nan_flags(g, x), keepdims_i=int(keepdims)) if axes is None else
               g.op("ReduceMax", _nan_flags(g, x), axes_i=axes, keepdims_i=int(keepdims)))
    return g.op("Greater", reduced, g.op("Constant", value_t=torch.tensor(0.0)))


def _nan_where(g, has_nan, value):
    return g.op("Where", has_nan, _constant_like(g, float("nan"), value), value)


#: for other translations' repairs (``onnx_norms``): whether the reduced elements hold a NaN, and
#: a value made NaN there
any_nan, nan_where = _any_nan, _nan_where


def _first_nan(g, has_nan, x, dim: int, keepdim: bool, index):
    first = g.op("ArgMax", _nan_flags(g, x), axis_i=dim, keepdims_i=int(keepdim))
    return g.op("Where", has_nan, first, index)


def _readable(x) -> bool:
    return scalar_type(x) in _FLOATING and (rank(x) or 0) > 0


def _nan_uniform_along(x, dim: int) -> bool:
    """Whether each row of ``x`` along ``dim`` is NaN-free or all NaN: ``x`` is a ``Softmax`` over
    ``dim`` (a NaN, or an infinity, anywhere in a row makes the whole row NaN, in eager and in ORT).
    ORT's ``ReduceMax``/``ArgMax`` over such rows already agree with eager (all NaN: NaN, index 0).
    Decided by the graph only, never by sizes (a size-dependent graph would be one graph per size)."""
    node, size = x.node(), rank(x)
    if node.kind() != "onnx::Softmax" or not size:
        return False
    return (node.i("axis") if node.hasAttribute("axis") else -1) % size == dim % size


#: producers whose values are finite or NaN (never infinite): a sum of theirs is NaN exactly where a
#: summed element is
_FINITE_OR_NAN = frozenset({"onnx::Softmax", "onnx::Sigmoid", "onnx::Tanh"})


_TORCH_FLOATS = {"Float": torch.float32, "Double": torch.float64, "Half": torch.float16,
                 "BFloat16": torch.bfloat16}


def _constant_like(g, number: float, value):
    """``number`` as a constant of ``value``'s element type (a ``Constant`` where the type is known:
    ORT folds no ``CastLike`` whose second input is computed)."""
    dtype = _TORCH_FLOATS.get(scalar_type(value))
    if dtype is not None:
        return g.op("Constant", value_t=torch.tensor(number, dtype=dtype))
    return g.op("CastLike", g.op("Constant", value_t=torch.tensor(number)), value)


def _nan_added(g, x, value):
    """``value`` (the max or min of all of ``x``) made NaN where ``x`` holds one, for ``x`` finite or
    NaN: ``value + 0 * sum(x)`` (3 nodes instead of the flags' 7; ``value + 0`` is ``value`` exactly,
    the sign of a zero aside)."""
    return g.op("Add", value, g.op("Mul", g.op("ReduceSum", x, keepdims_i=0), _constant_like(g, 0.0, x)))


#: producers whose values are never -inf (NaN passes through them): a max pooling of theirs needs no
#: "window of -inf only" repair
_NON_NEGATIVE = frozenset({"onnx::Relu", "onnx::Sigmoid", "onnx::Softmax", "onnx::Exp", "onnx::Abs"})
_NEVER_MINUS_INF = _NON_NEGATIVE | {"onnx::Tanh"}


def _int64_extreme(g, x, larger: bool, dim: int | None, keepdim: bool):
    """ORT's int64 ``ReduceMax``/``ReduceMin`` are wrong beyond 32 bits (``[900000064,
    3600000256, 2099999872]`` gave 2099999872) while its ``ArgMax``/``ArgMin`` are right:
    the element at the arg-extreme, over ``dim`` or all elements (``dim`` None)."""
    if dim is None:
        x, dim = g.op("Reshape", x, g.op("Constant", value_t=torch.tensor([-1], dtype=torch.int64))), 0
    where = g.op("ArgMax" if larger else "ArgMin", x, axis_i=dim, keepdims_i=1)
    picked = g.op("GatherElements", x, where, axis_i=dim)
    return picked if keepdim else g.op("Squeeze", picked, g.op("Constant", value_t=torch.tensor([dim])))


#: for ``onnx_edge_selection``'s ``aminmax``
int64_extreme = _int64_extreme


def max_like(larger: bool) -> Callable[[Symbolic], Symbolic]:
    """``aten::max`` (``larger``)/``aten::min``: ``(x)``, ``(x, dim, keepdim)``; ``(x, y)``
    by ``onnx_int64_bounds.pick`` (int64 pairs by comparison)."""

    def wrap(original: Symbolic) -> Symbolic:
        elementwise = pick(smaller=not larger)(lambda g, a, b: original(g, a, b))

        def symbolic(g, self, dim_or_y=None, keepdim=None):
            if not is_none(dim_or_y) and is_none(keepdim):
                return elementwise(g, self, dim_or_y)
            result = original(g, self, dim_or_y, keepdim)
            dim, keep = constant(dim_or_y), constant(keepdim)
            if scalar_type(self) == "Long" and (rank(self) or 0) > 0:
                if is_none(dim_or_y):
                    return _int64_extreme(g, self, larger, None, False)
                if isinstance(dim, int) and isinstance(keep, (bool, int)):
                    return _int64_extreme(g, self, larger, dim, bool(keep)), result[1]
            if not _readable(self):
                return result
            if is_none(dim_or_y):
                if self.node().kind() in _FINITE_OR_NAN:
                    return _nan_added(g, self, result)
                return _nan_where(g, _any_nan(g, self, None, False), result)
            if not isinstance(dim, int) or not isinstance(keep, (bool, int)):
                return result
            values, indices = result
            if _nan_uniform_along(self, dim):
                return result
            has_nan = _any_nan(g, self, [dim], bool(keep))
            return _nan_where(g, has_nan, values), _first_nan(g, has_nan, self, dim, bool(keep), indices)

        return symbolic

    return wrap


def amax_like(original: Symbolic) -> Symbolic:
    """``aten::amax``/``aten::amin`` over the constant ``dim`` list (all dims if empty)."""

    def symbolic(g, self, dim, keepdim):
        result = original(g, self, dim, keepdim)
        dims, keep = constant(dim), constant(keepdim)
        dims = [dims] if isinstance(dims, int) else dims
        if not _readable(self) or not isinstance(dims, list) or not isinstance(keep, (bool, int)):
            return result
        return _nan_where(g, _any_nan(g, self, dims or None, bool(keep)), result)

    return symbolic


def argmax_like(larger: bool) -> Callable[[Symbolic], Symbolic]:
    """``aten::argmax`` (``larger``)/``aten::argmin``: along a constant ``dim``, or of the flattened
    input. A float32/16 input is ranked by its ``_nan_extreme_key`` (one ``ArgMax`` of 4 nodes' key:
    the first NaN where there is one, else the first extreme, as eager); a float64 one, which has no
    wider key, by torch's translation with the first NaN's index put where a NaN is."""

    def wrap(original: Symbolic) -> Symbolic:
        def symbolic(g, self, dim, keepdim):
            axis, keep = constant(dim), constant(keepdim)
            if (not _readable(self) or not isinstance(keep, (bool, int))
                    or (axis is None and keep) or (isinstance(axis, int) and _nan_uniform_along(self, axis))):
                return original(g, self, dim, keepdim)
            if scalar_type(self) != "Double" and (axis is None or isinstance(axis, int)):
                return original(g, _nan_extreme_key(g, self, larger), dim, keepdim)
            result = original(g, self, dim, keepdim)
            if axis is None:
                flat = g.op("Reshape", self, g.op("Constant", value_t=torch.tensor([-1], dtype=torch.int64)))
                return _first_nan(g, _any_nan(g, flat, None, False), flat, 0, False, result)
            if not isinstance(axis, int):
                return result
            return _first_nan(g, _any_nan(g, self, [axis], bool(keep)), self, axis, bool(keep), result)

        return symbolic

    return wrap


def _never_minus_inf(x, depth: int = 8) -> bool:
    """Whether ``x`` provably holds no -inf (NaN may pass): made by an operator in
    ``_NEVER_MINUS_INF``, by pooling, reshaping, concatenating or adding such values, or by multiplying such values by
    non-negative ones (this module's own pooling repair is such a sum)."""
    node = x.node()
    kind = node.kind()
    if kind in _NEVER_MINUS_INF:
        return True
    if depth == 0:
        return False
    if kind == "onnx::Constant":
        numbers = _float_constant(x)
        return numbers is not None and all(number >= 0 for number in numbers)
    inputs = list(node.inputs())
    if kind in ("onnx::MaxPool", "onnx::AveragePool", "onnx::Flatten", "onnx::Reshape", "onnx::Identity"):
        return bool(inputs) and _never_minus_inf(inputs[0], depth - 1)
    if kind in ("onnx::Add", "onnx::Concat"):
        return all(_never_minus_inf(value, depth - 1) for value in inputs)
    if kind == "onnx::Mul":  # non-negative factors, or zero times a finite value (this module's repairs)
        kinds = [value.node().kind() for value in inputs]
        if all(k in _NON_NEGATIVE or (k == "onnx::Constant" and _never_minus_inf(v, 0))
               for k, v in zip(kinds, inputs)):
            return True
        return any(_is_zero(v) for v in inputs) and all(_is_zero(v) or k in _FINITE_OR_NAN
                                                        for k, v in zip(kinds, inputs))
    return False


def _float_constant(value) -> list[float] | None:
    """The numbers of a floating ``onnx::Constant`` (flat), None for anything else (read as
    ``onnx_graph_values.constant`` reads one: unseen by the export's decision recorder)."""
    node = value.node()
    if node.kind() != "onnx::Constant" or not node.hasAttribute("value") or scalar_type(value) not in _FLOATING:
        return None
    with torch._C.DisableTorchFunction():
        return node.t("value").reshape(-1).tolist()


def _is_zero(value) -> bool:
    numbers = _float_constant(value)
    return numbers is not None and all(number == 0 for number in numbers)


def _nan_windows_by_average(g, x, values):
    """``values`` (a ``MaxPool`` of ``x``, which holds no -inf) made NaN where the window holds a NaN:
    the window's average is NaN exactly there (no -inf to meet a +inf), ``Tanh`` maps it into [-1, 1]
    keeping NaN, and ``values + 0 * tanh(average)`` is ``values`` elsewhere. None where the pooling is
    not one plain ``MaxPool`` of ``x`` with its attributes readable, or is dilated."""
    attributes = average_attributes(x, values, count_include_pad=1)
    if attributes is None or scalar_type(x) != "Float":  # ORT's CPU AveragePool: no float64 kernel
        return None
    average = g.op("AveragePool", x, **attributes)
    return g.op("Add", values, g.op("Mul", g.op("Tanh", average), _constant_like(g, 0.0, x)))


def pool_like(original: Symbolic) -> Symbolic:
    """``aten::max_pool{1,2,3}d`` and ``..._with_indices``: the pooled values (indices unchanged)."""

    def symbolic(g, self, *args):
        result = original(g, self, *args)
        if not _readable(self):
            return result
        values = result[0] if isinstance(result, tuple) else result
        if _never_minus_inf(self):
            repaired = _nan_windows_by_average(g, self, values)
        else:
            repaired = minus_inf_and_nan_by_average(g, self, values, _TORCH_FLOATS.get(scalar_type(self)))
        if repaired is not None:
            return (repaired, *result[1:]) if isinstance(result, tuple) else repaired

        def window_has(flags):
            pooled = original(g, g.op("Cast", flags, to_i=_ONNX_FLOAT), *args)
            pooled = pooled[0] if isinstance(pooled, tuple) else pooled
            return g.op("Greater", pooled, g.op("Constant", value_t=torch.tensor(0.0)))

        if not _never_minus_inf(self):
            above_minus_inf = window_has(g.op("Not", g.op("IsInf", self, detect_positive_i=0)))
            minus_inf = _constant_like(g, float("-inf"), self)
            values = g.op("Where", above_minus_inf, values, minus_inf)
        values = _nan_where(g, window_has(g.op("IsNaN", self)), values)
        return (values, *result[1:]) if isinstance(result, tuple) else values

    return symbolic


def _nan_extreme_key(g, x, larger: bool = True):
    """``x`` (float32 or narrower) as float64 where NaN is beyond every other value -- above ``+inf``
    (``larger``) or below ``-inf`` -- and every other value keeps its order and its ties: the finite
    values of ``x`` lie far inside +-1e300, the infinities are clamped to +-1e300 (``Min``/``Max``
    keep NaN, which the ``Where`` then replaces by the infinity)."""
    sign = 1.0 if larger else -1.0
    bounded = g.op("Min" if larger else "Max", g.op("Cast", x, to_i=_ONNX_DOUBLE),
                   g.op("Constant", value_t=torch.tensor(sign * 1e300, dtype=torch.float64)))
    beyond = g.op("Constant", value_t=torch.tensor(sign * float("inf"), dtype=torch.float64))
    return g.op("Where", g.op("IsNaN", x), beyond, bounded)


def _sort_key(g, x):
    """``x`` with NaN above ``+inf`` above every finite value: ``_nan_extreme_key`` for narrower
    floats; for float64, NaN as ``+inf``."""
    if scalar_type(x) == "Double":
        infinity = g.op("Constant", value_t=torch.tensor(float("inf"), dtype=torch.float64))
        return g.op("Where", g.op("IsNaN", x), infinity, x)
    return _nan_extreme_key(g, x)


def _nan_last_sort(g, original: Symbolic, x, dim: int, dim_at: int, args: tuple):
    """The indices of a float64 sort (``topk``: ``dim_at`` 1, its ``k`` first) with NaN above ``+inf``:
    ``original`` orders the key ``x`` with NaN as ``+inf`` (all of the dim), then, stably (ONNX
    ``TopK`` keeps equal values in index order), the NaN flags in that order; composed."""
    key = g.op("Where", g.op("IsNaN", x), _constant_like(g, float("inf"), x), x)
    if dim_at == 1:  # topk: the whole dim first, the k wanted of the second pass
        every = g.op("Gather", g.op("Shape", x), g.op("Constant", value_t=torch.tensor([dim])), axis_i=0)
        first = original(g, key, every, *args[1:])[1]
    else:
        first = original(g, key, *args)
        first = first[1] if isinstance(first, tuple) else first
    flags = g.op("GatherElements", g.op("Cast", g.op("IsNaN", x), to_i=_ONNX_DOUBLE), first, axis_i=dim)
    second = original(g, flags, *args)
    second = second[1] if isinstance(second, tuple) else second
    return g.op("GatherElements", first, second, axis_i=dim)


def sort_like(dim_at: int, values: bool) -> Callable[[Symbolic], Symbolic]:
    """``aten::sort``/``topk`` (``values``: their values gathered back from the input by
    the indices) and ``aten::argsort``: ordered by a key where NaN is the largest."""

    def wrap(original: Symbolic) -> Symbolic:
        def symbolic(g, self, *args):
            dim = constant(args[dim_at]) if len(args) > dim_at else None
            if not _readable(self) or not isinstance(dim, int):
                return original(g, self, *args)
            if scalar_type(self) == "Double":
                indices = _nan_last_sort(g, original, self, dim, dim_at, args)
            else:
                result = original(g, _sort_key(g, self), *args)
                indices = result[1] if values else result
            if not values:
                return indices
            return g.op("GatherElements", self, indices, axis_i=dim), indices

        return symbolic

    return wrap


def sign_like(original: Symbolic) -> Symbolic:
    """``aten::sign``: eager's sign of NaN is 0 (``(0 < x) - (x < 0)``); ONNX ``Sign`` gives NaN."""

    def symbolic(g, self):
        result = original(g, self)
        if scalar_type(self) not in _FLOATING:
            return result
        return g.op("Where", g.op("IsNaN", self), _constant_like(g, 0.0, self), result)

    return symbolic


def truth_like(original: Symbolic) -> Symbolic:
    """``aten::any``/``aten::all`` of a floating tensor: of its truth (``x != 0``; NaN is true)."""

    def symbolic(g, self, *args):
        if scalar_type(self) not in _FLOATING:
            return original(g, self, *args)
        return original(g, g.op("Not", g.op("Equal", self, _constant_like(g, 0.0, self))), *args)

    return symbolic


def _pool_with_indices(original: Symbolic) -> Symbolic:
    """Max pooling that returns indices: values by ``pool_like``, indices by ``onnx_pool_indices``."""
    return pool_like(indices_like(original))


#: operator -> how to wrap torch's translation of it
NAN_WRAPPERS: dict[str, Callable[[Symbolic], Symbolic]] = {
    "aten::max": max_like(larger=True), "aten::min": max_like(larger=False),
    "aten::amax": amax_like, "aten::amin": amax_like,
    "aten::argmax": argmax_like(larger=True), "aten::argmin": argmax_like(larger=False),
    "aten::sort": sort_like(0, values=True), "aten::topk": sort_like(1, values=True),
    "aten::argsort": sort_like(0, values=False), "aten::sign": lambda original: sign_like(int_sign_like(original)),
    "aten::sgn": lambda original: sign_like(int_sign_like(original)),
    "aten::any": truth_like, "aten::all": truth_like,
    **{f"aten::max_pool{n}d": pool_like for n in (1, 2, 3)},
    **{f"aten::max_pool{n}d_with_indices": _pool_with_indices for n in (1, 2, 3)},
    **{f"aten::adaptive_max_pool{n}d": _pool_with_indices for n in (1, 2, 3)},
}

__all__ = ["NAN_WRAPPERS"]
