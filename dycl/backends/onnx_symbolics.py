"""ONNX translations dycl uses for the duration of one export: operators the
TorchScript exporter (opset 17) has none for, or a wrong one.

- ``aten::diff`` (``torch.diff``; transformers computes it for every call without
  an attention mask): ``n == 1`` along ``dim``, with ``prepend``/``append``, as
  ``Slice(x, 1:) - Slice(x, :-1)`` of their concatenation (``Xor`` for bool).
- ``aten::index_add`` (``out.index_add_(0, token_idx, expert_out)``, how MoE layers
  combine expert outputs): torch's translation is a ``ScatterElements`` without
  reduction, so a token index that occurs twice keeps one of its rows instead of
  their sum (torch only warns). Here: ``ScatterElements(reduction="add")`` with the
  index broadcast to the source's shape, which sums duplicates as eager does.
- ``aten::histc`` (transformers 5's grouped experts count the tokens per expert with
  ``torch.histc``): torch has no translation. Here, for a constant range ``min < max``:
  each element's bin ``floor((x - min) * bins / (max - min))``, the right edge in the
  last bin, elements outside the range dropped, counted by comparing with every bin.
- ``aten::_grouped_mm`` (``F.grouped_mm(a, b, offs=offs)``, the same experts' matmul):
  torch has no translation. Here, for a 2-D ``a``, a 3-D ``b``, ``offs`` and no bias or
  output dtype: row ``i`` belongs to group ``g = #{offs <= i}`` and is multiplied by
  ``b[g]`` (a ``Gather`` of ``b`` then ``MatMul``), which is what the kernel computes
  for every row before ``offs[-1]``; rows past it, which the kernel leaves undefined,
  get the last group's product.
- ``aten::cumsum`` (transformers' packed-sequence detection, ``(diff != 1).cumsum(-1)``):
  eager sums bool and small integers as int64; torch's translation gives ONNX
  Runtime a ``CumSum`` of bool, an invalid model. Cast first.
- ``aten::scaled_dot_product_attention`` with ``enable_gqa=True`` (grouped-query
  attention; transformers passes it whenever it skips the mask, as in a KV-cache
  decoding step): torch's translation refuses it. Here: each key/value head repeated
  for its group of query heads (``repeat_interleave`` on dim -3, as eager does, via
  ``Unsqueeze``/``Tile``/``Reshape`` with the head counts read from the shapes),
  then torch's own translation with ``enable_gqa=False``.
- ``aten::max``/``min``/``amax``/``amin``/``argmax``/``argmin`` and ``max_pool*d`` on
  floating inputs: torch's translations with NaN (and a window of ``-inf`` only)
  propagated as eager does (``onnx_nan_reductions``).
- ``aten::index_put`` with ``accumulate=True``: repeated indices summed (``onnx_accumulate``).
- ``aten::diagonal`` (``x.diagonal()``, ``torch.diagonal(x, offset, dim1, dim2)``): torch's
  translation multiplies by an identity mask and sums, so an ``inf`` or ``NaN`` anywhere
  in a row made its diagonal element NaN, and an integer input came back as float. Here:
  the diagonal elements gathered from the input flattened over its last two dims (after
  moving ``dim1``/``dim2`` there), at ``(i + max(-offset, 0)) * n2 + i + max(offset, 0)``.
- ``minimum``/``maximum`` of int64: by comparisons (``onnx_int64_bounds``; ORT's int64
  ``Clip``/``Min``/``Max`` are wrong beyond 32 bits).
- ``clamp``/``clip``/``clamp_min``/``clamp_max``: by comparisons, for every type, with eager's NaN
  and infinities (``onnx_clamp``).
- Edge values found by the operator sweep (``tests/compile/test_op_edge_sweep.py``): ``gelu`` and
  ``hardshrink`` (``onnx_edge_activations``); ``remainder``, ``fmod``, int64 ``sign``, integer
  ``relu``, ``pow(x, 0.5)``, ``softplus``, ``hardswish``, ``logsigmoid``, int64 ``prod`` refused
  (``onnx_edge_arithmetic``); ``vector_norm(ord=±inf)`` with NaN (``onnx_norms``); max-pool
  indices of windows with NaN (``onnx_pool_indices``); ``unique`` with NaN (``onnx_unique``);
  ``aminmax``, ``bucketize`` with NaN, integer ``>>`` and rounding, ``scatter_reduce`` amax/amin
  with NaN (``onnx_edge_selection``); ``binary_cross_entropy_with_logits`` by eager's formula
  (``onnx_losses``: the translation's ``log(1 - sigmoid(20))`` was ``-inf``); float64 ``log_softmax``
  with ``+inf`` (``onnx_float64_edges``); operators ORT has no float64 CPU kernel for are refused
  after the export (``onnx_float64_kernels``); arithmetic and comparisons of 0-d float64 tensors,
  which the exporter's scalar type analysis did in float32 (``onnx_float64_scalars``); linear
  interpolation of a static length by eager's formula (``onnx_linear_resize``: ``inf`` gave NaN).
- ``aten::floor_divide``/``floordiv`` and ``aten::div`` with a ``rounding_mode``: rounded as eager
  rounds (``onnx_division``; torch's translation truncated ``-7 // 3`` to -2).
- ``aten::tensor_split`` at indices computed from data (``onnx_tensor_split``: torch's translation
  took the list for a number of sections and emitted an invalid ``Tile``).
- ``aten::add`` of two bool tensors (``pos + neg``; eager gives their logical or): torch's
  translation gives ONNX Runtime an ``Add`` of bool, an invalid model. Here: ``Or``; any
  other ``add`` is torch's own translation (opset 11's, which also appends to lists).
- ``aten::sum`` of an int64 tensor (no ``dtype``): ONNX Runtime's ``ReduceSum`` of int64
  is not exact past 2**53 and saturates where eager wraps (``[2**60 + 1, 1]`` sums to
  ``2**60``). Here: a ``CumSum`` along each summed dim (exact, wrapping) and its last
  slice. Any other ``sum`` is torch's own translation.

Assumes: the translations read the graph only through the TorchScript graph API
that every symbolic receives (``g.op``, ``Value.node()``/``.type()``, see
``onnx_graph_values``), never through ``torch.onnx.symbolic_helper``: that name is
a deprecated shim which, once anyone imports it (torchvision does, and
transformers imports torchvision), is a module without the helpers' private
names. So the translations work whatever was imported first.

Guarantees: ``local_symbolics()`` installs a translation only where the user has
registered none of their own (theirs wins), as a custom override that it removes
on exit, so torch's own translations are back and nothing outlives the export.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from typing import Any

import torch

from dycl.backends.onnx_accumulate import WRAPPERS as ACCUMULATE_WRAPPERS
from dycl.backends.onnx_clamp import WRAPPERS as CLAMP_WRAPPERS
from dycl.backends.onnx_division import WRAPPERS as DIVISION_WRAPPERS
from dycl.backends.onnx_division import floor_divide
from dycl.backends.onnx_edge_activations import WRAPPERS as ACTIVATION_WRAPPERS
from dycl.backends.onnx_edge_arithmetic import WRAPPERS as ARITHMETIC_WRAPPERS
from dycl.backends.onnx_edge_selection import WRAPPERS as SELECTION_WRAPPERS
from dycl.backends.onnx_float64_edges import WRAPPERS as FLOAT64_WRAPPERS
from dycl.backends.onnx_float64_scalars import with_float64_scalars
from dycl.backends.onnx_graph_values import (
    SymbolicUnsupported,
    constant,
    int_constant,
    is_none,
    onnx_type_of_dtype_code,
    rank,
    scalar_type,
)
from dycl.backends.onnx_int64_bounds import WRAPPERS as INT64_WRAPPERS
from dycl.backends.onnx_linear_resize import WRAPPERS as RESIZE_WRAPPERS
from dycl.backends.onnx_losses import WRAPPERS as LOSS_WRAPPERS
from dycl.backends.onnx_nan_reductions import NAN_WRAPPERS
from dycl.backends.onnx_norms import WRAPPERS as NORM_WRAPPERS
from dycl.backends.onnx_tensor_split import WRAPPERS as SPLIT_WRAPPERS
from dycl.backends.onnx_unique import WRAPPERS as UNIQUE_WRAPPERS

_OPSET = 17
# Element types eager torch sums as int64 (``torch.cumsum`` promotes them).
_SUMMED_AS_INT64 = frozenset({"Bool", "Byte", "Char", "Short", "Int"})
_ONNX_INT64 = 7
_ONNX_FLOAT = 1
_ONNX_DOUBLE = 11
_ONNX_TYPES = {"Float": 1, "Double": 11, "Half": 10, "BFloat16": 16}


def _int64s(g, values: list[int]):
    return g.op("Constant", value_t=torch.tensor(values, dtype=torch.int64))


def _diff(g, self, n, dim, prepend, append):
    if int_constant(n, "diff", "n") != 1:
        raise SymbolicUnsupported("diff", "n other than 1")
    dim = int_constant(dim, "diff", "dim")
    parts = [v for v in (prepend, self, append) if not is_none(v)]
    values = g.op("Concat", *parts, axis_i=dim) if len(parts) > 1 else self
    axes = _int64s(g, [dim])
    later = g.op("Slice", values, _int64s(g, [1]), _int64s(g, [sys.maxsize]), axes)
    earlier = g.op("Slice", values, _int64s(g, [0]), _int64s(g, [-1]), axes)
    return g.op("Xor" if scalar_type(self) == "Bool" else "Sub", later, earlier)


def _index_add(g, self, dim, index, source, alpha):
    if not is_none(alpha) and constant(alpha) != 1:
        raise SymbolicUnsupported("index_add", "alpha other than 1")
    dim = int_constant(dim, "index_add", "dim")
    self_rank = rank(self)
    if self_rank is None or rank(source) != self_rank:
        raise SymbolicUnsupported("index_add", "a source of another rank or an unknown rank")
    dim = dim % self_rank if self_rank else 0
    along = _int64s(g, [-1 if axis == dim else 1 for axis in range(self_rank)])
    index = g.op("Expand", g.op("Reshape", index, along), g.op("Shape", source))
    return g.op("ScatterElements", self, index, source, axis_i=dim, reduction_s="add")


def _cumsum(g, self, dim, dtype=None):
    axis = g.op("Constant", value_t=torch.tensor(int_constant(dim, "cumsum", "dim"), dtype=torch.int64))
    if dtype is not None and not is_none(dtype):
        code = int_constant(dtype, "cumsum", "dtype")
        self = g.op("Cast", self, to_i=onnx_type_of_dtype_code(code, "cumsum"))
    elif scalar_type(self) in _SUMMED_AS_INT64:
        self = g.op("Cast", self, to_i=_ONNX_INT64)
    return g.op("CumSum", self, axis)


def _sdpa(g, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    from torch.onnx._internal.torchscript_exporter import symbolic_opset14

    if constant(enable_gqa) is True:
        key, value = (_repeat_heads(g, kv, query) for kv in (key, value))
        enable_gqa = g.op("Constant", value_t=torch.tensor(False))
    return symbolic_opset14.scaled_dot_product_attention(g, query, key, value, attn_mask, dropout_p, is_causal,
                                                         scale, enable_gqa)


def _add(g, self, other, alpha=None):
    from torch.onnx._internal.torchscript_exporter import symbolic_opset11

    if scalar_type(self) == "Bool" and scalar_type(other) == "Bool":
        if not is_none(alpha) and constant(alpha) not in (1, True):
            raise SymbolicUnsupported("add", "bool tensors with an alpha other than 1")
        return g.op("Or", self, other)
    return symbolic_opset11.add(g, self, other, alpha)


def _sum(g, self, *args):
    from torch.onnx._internal.torchscript_exporter import symbolic_opset13

    dims = rank(self)
    if scalar_type(self) != "Long" or not is_none(args[-1]) or dims is None:
        return symbolic_opset13._reduce_with_dtype("ReduceSum", "sum")(g, self, *args)
    if len(args) == 1 or constant(args[0]) in (None, []):  # every dim
        flat = g.op("Reshape", self, _int64s(g, [-1]))
        return g.op("Reshape", _exact_int_sum(g, flat, [0]), _int64s(g, []))
    dim, keepdim = constant(args[0]), constant(args[1])
    if not isinstance(dim, list) or not isinstance(keepdim, bool):
        raise SymbolicUnsupported("sum", "an int64 sum over dims that are not constant")
    axes = sorted({d % dims for d in dim}) if dims else [0]
    total = _exact_int_sum(g, self, axes)
    return total if keepdim or not dims else g.op("Squeeze", total, _int64s(g, axes))


def _exact_int_sum(g, values, axes: list[int]):
    """The sum along ``axes``, kept as dims of size 1: the last slice of a running sum."""
    for axis in axes:
        running = g.op("CumSum", values, g.op("Constant", value_t=torch.tensor(axis, dtype=torch.int64)))
        values = g.op("Slice", running, _int64s(g, [-1]), _int64s(g, [sys.maxsize]), _int64s(g, [axis]))
    return values


def _repeat_heads(g, kv, query):
    """``kv.repeat_interleave(q_heads // kv_heads, dim=-3)`` for (..., heads, seq, head_dim) tensors,
    the counts read from the shapes at run time."""
    dims = rank(kv)
    if dims is None or dims < 3 or rank(query) != dims:
        raise SymbolicUnsupported("scaled_dot_product_attention", "grouped-query attention of unknown ranks")
    q_shape, kv_shape = g.op("Shape", query), g.op("Shape", kv)

    def dim(shape, start: int, end: int):
        return g.op("Slice", shape, _int64s(g, [start]), _int64s(g, [end]), _int64s(g, [0]))

    q_heads, kv_heads = dim(q_shape, dims - 3, dims - 2), dim(kv_shape, dims - 3, dims - 2)
    group = g.op("Div", q_heads, kv_heads)
    repeats = g.op("Concat", _int64s(g, [1] * (dims - 2)), group, _int64s(g, [1, 1]), axis_i=0)
    tiled = g.op("Tile", g.op("Unsqueeze", kv, _int64s(g, [dims - 2])), repeats)
    target = g.op("Concat", dim(kv_shape, 0, dims - 3), q_heads, _int64s(g, [-1]), dim(kv_shape, dims - 1, dims),
                  axis_i=0)
    return g.op("Reshape", tiled, target)


def _histc(g, self, bins, low, high):
    bins = int_constant(bins, "histc", "bins")
    low, high = constant(low), constant(high)
    if not all(isinstance(v, (int, float)) for v in (low, high)) or not low < high or bins < 1:
        raise SymbolicUnsupported("histc", "a range that is not constant with min < max")
    element = scalar_type(self)
    values = g.op("Cast", g.op("Reshape", self, _int64s(g, [-1])), to_i=_ONNX_DOUBLE)
    low_c, high_c = (g.op("Constant", value_t=torch.tensor(v, dtype=torch.float64)) for v in (low, high))
    scale = g.op("Constant", value_t=torch.tensor(bins / (high - low), dtype=torch.float64))
    position = g.op("Floor", g.op("Mul", g.op("Sub", values, low_c), scale))
    position = g.op("Min", position, g.op("Constant", value_t=torch.tensor(bins - 1, dtype=torch.float64)))
    inside = g.op("And", g.op("Not", g.op("Less", values, low_c)), g.op("Not", g.op("Greater", values, high_c)))
    every_bin = g.op("Constant", value_t=torch.arange(bins, dtype=torch.float64).unsqueeze(0))
    hit = g.op("And", g.op("Equal", g.op("Unsqueeze", position, _int64s(g, [1])), every_bin),
               g.op("Unsqueeze", inside, _int64s(g, [1])))
    counts = g.op("ReduceSum", g.op("Cast", hit, to_i=_ONNX_DOUBLE), _int64s(g, [0]), keepdims_i=0)
    return g.op("Cast", counts, to_i=_ONNX_TYPES.get(element, _ONNX_FLOAT))


def _grouped_mm(g, mat_a, mat_b, offs, bias=None, out_dtype=None):
    if rank(mat_a) != 2 or rank(mat_b) != 3 or is_none(offs) or not is_none(bias) or not is_none(out_dtype):
        raise SymbolicUnsupported("_grouped_mm", "other than a 2-D input, 3-D weights, offsets, no bias or dtype")
    rows = g.op("Gather", g.op("Shape", mat_a), _int64s(g, [0]), axis_i=0)
    row = g.op("Range", g.op("Constant", value_t=torch.tensor(0, dtype=torch.int64)),
               g.op("Squeeze", rows, _int64s(g, [0])), g.op("Constant", value_t=torch.tensor(1, dtype=torch.int64)))
    ends = g.op("Unsqueeze", g.op("Cast", offs, to_i=_ONNX_INT64), _int64s(g, [0]))
    group = g.op("ReduceSum", g.op("Cast", g.op("LessOrEqual", ends, g.op("Unsqueeze", row, _int64s(g, [1]))),
                                   to_i=_ONNX_INT64), _int64s(g, [1]), keepdims_i=0)
    last = g.op("Sub", g.op("Gather", g.op("Shape", mat_b), _int64s(g, [0]), axis_i=0), _int64s(g, [1]))
    weights = g.op("Gather", mat_b, g.op("Min", group, last), axis_i=0)
    product = g.op("MatMul", g.op("Unsqueeze", mat_a, _int64s(g, [1])), weights)
    return g.op("Squeeze", product, _int64s(g, [1]))


def _diagonal(g, self, offset, dim1, dim2):
    dims = rank(self)
    if dims is None or dims < 2:
        raise SymbolicUnsupported("diagonal", "an input of unknown rank")
    offset = int_constant(offset, "diagonal", "offset")
    dim1, dim2 = int_constant(dim1, "diagonal", "dim1") % dims, int_constant(dim2, "diagonal", "dim2") % dims
    x = g.op("Transpose", self, perm_i=[a for a in range(dims) if a not in (dim1, dim2)] + [dim1, dim2])
    shape = g.op("Shape", x)
    rows = g.op("Slice", shape, _int64s(g, [-2]), _int64s(g, [-1]), _int64s(g, [0]))
    cols = g.op("Slice", shape, _int64s(g, [-1]), _int64s(g, [sys.maxsize]), _int64s(g, [0]))
    first_row, first_col = _int64s(g, [max(-offset, 0)]), _int64s(g, [max(offset, 0)])
    length = g.op("Max", g.op("Min", g.op("Sub", rows, first_row), g.op("Sub", cols, first_col)), _int64s(g, [0]))
    step = g.op("Range", g.op("Constant", value_t=torch.tensor(0)), g.op("Squeeze", length, _int64s(g, [0])),
                g.op("Constant", value_t=torch.tensor(1)))
    where = g.op("Add", g.op("Mul", g.op("Add", step, first_row), cols), g.op("Add", step, first_col))
    leading = g.op("Slice", shape, _int64s(g, [0]), _int64s(g, [-2]), _int64s(g, [0]))
    flat = g.op("Reshape", x, g.op("Concat", leading, _int64s(g, [-1]), axis_i=0))
    return g.op("Gather", flat, where, axis_i=-1)


_SYMBOLICS = {"aten::diff": _diff, "aten::diagonal": _diagonal, "aten::floor_divide": floor_divide,
              "aten::index_add": _index_add, "aten::cumsum": _cumsum, "aten::histc": _histc,
              "aten::_grouped_mm": _grouped_mm, "aten::scaled_dot_product_attention": _sdpa,
              "aten::floordiv": floor_divide, "aten::add": _add, "aten::sum": _sum}


@contextlib.contextmanager
def local_symbolics() -> Iterator[None]:
    """Register dycl's translations that are missing, for the ``with`` block only."""
    from torch.onnx._internal.torchscript_exporter import registration

    _load_translations()
    symbolics = with_float64_scalars({**_SYMBOLICS, **_wrapped(registration.registry)}, registration.registry, _OPSET)
    added = [name for name in symbolics if not _user_overridden(name)]
    unknown = [name for name in added if registration.registry.get_function_group(name) is None]
    for name in added:
        torch.onnx.register_custom_op_symbolic(name, symbolics[name], _OPSET)
    try:
        yield
    finally:
        for name in added:
            torch.onnx.unregister_custom_op_symbolic(name, _OPSET)
        _forget(registration.registry, unknown)


def _load_translations() -> None:
    """Import torch's translation modules for every opset up to ``_OPSET``.

    They register themselves on import, and torch imports them only inside its first export: before
    that, the registry holds only what other imports pulled in, so the first export of a process
    wrapped no ``binary_cross_entropy_with_logits`` (opset 12) and an older ``max_pool`` translation.
    """
    for version in range(7, _OPSET + 1):
        importlib.import_module(f"torch.onnx._internal.torchscript_exporter.symbolic_opset{version}")


def _wrapped(registry: Any) -> dict[str, Any]:
    """The wrappers of ``onnx_nan_reductions``, ``onnx_accumulate``, ``onnx_division``,
    ``onnx_int64_bounds`` and the edge-value modules around torch's own translations for the opset."""
    found = {}
    for name, wrap in {**NAN_WRAPPERS, **ACCUMULATE_WRAPPERS, **DIVISION_WRAPPERS, **INT64_WRAPPERS,
                        **CLAMP_WRAPPERS, **ACTIVATION_WRAPPERS, **NORM_WRAPPERS, **UNIQUE_WRAPPERS,
                        **ARITHMETIC_WRAPPERS, **SELECTION_WRAPPERS,
                        **LOSS_WRAPPERS, **FLOAT64_WRAPPERS, **RESIZE_WRAPPERS, **SPLIT_WRAPPERS}.items():
        group = registry.get_function_group(name)
        original = group.get(_OPSET) if group is not None else None
        if original is not None:
            found[name] = wrap(original)
    return found


def _forget(registry: Any, names: list[str]) -> None:
    """Drop the groups that registering created for operators torch has no translation of.

    ``unregister_custom_op_symbolic`` leaves an empty group behind, and an export of that
    operator after dycl then fails inside torch (``min()`` of no opset versions) instead of
    with torch's own "unsupported operator" error; torch.onnx has no public call for this.
    """
    for name in names:
        group = registry.get_function_group(name)
        if group is not None and not any(True for _ in group._functions):
            registry._registry.pop(name, None)


def _user_overridden(name: str) -> bool:
    """Whether someone registered their own translation of ``name``.

    torch.onnx has no public query for this; the TorchScript exporter's registry is
    read from its canonical module at call time (it is not one the shim replaces).
    """
    from torch.onnx._internal.torchscript_exporter import registration

    group = registration.registry.get_function_group(name)
    return group is not None and any(group._functions.overridden(version) for version in group._functions)


__all__ = ["local_symbolics"]
