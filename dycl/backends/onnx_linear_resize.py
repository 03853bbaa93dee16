"""``F.interpolate(x, mode="linear")`` (``aten::upsample_linear1d``) by eager's formula.

Eager's linear upsampling is ``l0 * x[i0] + l1 * x[i1]`` at each output position, with the
source indices and weights of ``area_pixel_compute_source_index``: the scale in the input's type
(``length / size``, ``1 / scale_factor``, or ``(length - 1) / (size - 1)`` with ``align_corners``),
``scale * (i + 0.5) - 0.5`` in float64, then in the input's type, clamped at 0 (at float32 a weight
that is 0 in exact arithmetic is ``1.5e-8``, and ``-inf`` next to it gives ``-inf``, not
``0 * -inf``). ONNX Runtime's ``Resize`` interpolates another way, so an ``inf`` in the input gave
NaN where eager gives ``inf`` (and the reverse), and it has no float64 kernel. Here the indices and
weights are computed in the graph from the input's length (which may be symbolic) as eager
computes them, then two ``Gather`` along the last dim, two ``Mul`` and an ``Add``.

Assumes: the TorchScript exporter's arguments ``(input, output_size, align_corners, scale_factors)``
with a constant ``align_corners`` and a constant size or scale (else torch's translation is kept,
and so is any rank but 3 and any type but float32/float64). Guarantees: the result's type and
shape are torch's translation's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from dycl.backends.onnx_graph_values import constant, is_none, rank, scalar_type

Symbolic = Callable[..., Any]
_ONNX = {"Float": 1, "Double": 11}
_TORCH = {"Float": torch.float32, "Double": torch.float64}
_ONNX_INT64, _ONNX_DOUBLE = 7, 11


def _const(g, value, dtype: torch.dtype):
    return g.op("Constant", value_t=torch.tensor(value, dtype=dtype))


def _plan(output_size, args: tuple) -> tuple[bool, int | None, float | None] | None:
    """``(align_corners, size, scale)`` read from the arguments (one of size/scale None), or None."""
    corners = constant(args[0]) if args else None
    sizes = None if is_none(output_size) else constant(output_size)
    scales = constant(args[1]) if len(args) > 1 and not is_none(args[1]) else None
    scale = float(scales[0]) if isinstance(scales, list) and len(scales) == 1 else None
    if not isinstance(corners, bool):
        return None
    if isinstance(sizes, list) and len(sizes) == 1:
        return corners, int(sizes[0]), scale
    return (corners, None, scale) if is_none(output_size) and scale is not None else None


def _source(g, length, size, plan: tuple[bool, int | None, float | None], kind: str):
    """Each output position's source coordinate, in the input's type (see the module's docstring)."""
    corners, _, scale = plan
    onnx_type, one = _ONNX[kind], _const(g, [1], torch.int64)
    positions = g.op("Range", _const(g, 0, torch.int64), g.op("Squeeze", size, _const(g, [0], torch.int64)),
                     _const(g, 1, torch.int64))
    if corners:
        ratio = g.op("Div", g.op("Cast", g.op("Sub", length, one), to_i=onnx_type),
                     g.op("Cast", g.op("Max", g.op("Sub", size, one), one), to_i=onnx_type))
        ratio = g.op("Where", g.op("Greater", size, one), ratio, _const(g, [0.0], _TORCH[kind]))
        return g.op("Mul", ratio, g.op("Cast", positions, to_i=onnx_type))
    if scale is not None and scale > 0:
        ratio = _const(g, [1.0 / scale], _TORCH[kind])
    else:
        ratio = g.op("Div", g.op("Cast", length, to_i=onnx_type), g.op("Cast", size, to_i=onnx_type))
    wide = g.op("Mul", g.op("Cast", ratio, to_i=_ONNX_DOUBLE),
                g.op("Add", g.op("Cast", positions, to_i=_ONNX_DOUBLE), _const(g, 0.5, torch.float64)))
    source = g.op("Cast", g.op("Sub", wide, _const(g, 0.5, torch.float64)), to_i=onnx_type)
    return g.op("Max", source, _const(g, 0.0, _TORCH[kind]))


def linear_like(original: Symbolic) -> Symbolic:
    """``aten::upsample_linear1d`` by eager's formula."""

    def symbolic(g, self, output_size, *args):
        kind, plan = scalar_type(self), _plan(output_size, args)
        if kind not in _ONNX or rank(self) != 3 or plan is None:
            return original(g, self, output_size, *args)
        length = g.op("Gather", g.op("Shape", self), _const(g, [2], torch.int64), axis_i=0)
        if plan[1] is not None:
            size = _const(g, [plan[1]], torch.int64)
        else:
            scaled = g.op("Mul", g.op("Cast", length, to_i=_ONNX_DOUBLE), _const(g, plan[2], torch.float64))
            size = g.op("Cast", g.op("Floor", scaled), to_i=_ONNX_INT64)
        source = _source(g, length, size, plan, kind)
        first = g.op("Cast", source, to_i=_ONNX_INT64)
        second = g.op("Add", first, g.op("Cast", g.op("Less", first, g.op("Sub", length, _const(g, [1], torch.int64))),
                                         to_i=_ONNX_INT64))
        later = g.op("Sub", source, g.op("Cast", first, to_i=_ONNX[kind]))
        later = g.op("Min", g.op("Max", later, _const(g, 0.0, _TORCH[kind])), _const(g, 1.0, _TORCH[kind]))
        earlier = g.op("Sub", _const(g, 1.0, _TORCH[kind]), later)
        return g.op("Add", g.op("Mul", g.op("Gather", self, first, axis_i=2), earlier),
                    g.op("Mul", g.op("Gather", self, second, axis_i=2), later))

    return symbolic


WRAPPERS: dict[str, Callable[[Symbolic], Symbolic]] = {"aten::upsample_linear1d": linear_like}

__all__ = ["WRAPPERS"]
