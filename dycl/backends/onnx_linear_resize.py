"""``F.interpolate(x, mode="linear")`` of a 3-d tensor with a static length, by eager's formula.

Eager's linear upsampling is ``l0 * x[i0] + l1 * x[i1]`` at each output position, with the
source indices and weights of ``area_pixel_compute_source_index`` (the scale in the input's type,
``scale * (i + 0.5) - 0.5`` in float64: at float32 a weight that is 0 in exact arithmetic is
``1.5e-8``, and then ``-inf`` next to it gives ``-inf``, not ``0 * -inf``);
ONNX Runtime's ``Resize`` interpolates another way, so an ``inf`` in the input gave NaN where eager
gives ``inf`` (and the reverse). Here the indices and weights are computed at export, with torch,
as eager computes them, and the graph is two ``Gather`` along the last dim, two ``Mul`` and an
``Add``: NaN, ``±inf`` and rounding as eager's.

Assumes: the TorchScript exporter's arguments ``(input, output_size, align_corners, scale_factors)``;
the input's last dim is static in the exported graph (else torch's translation is kept, and so
is any other rank, a size that is not a constant, or a non-floating type).
Guarantees: the result's type and shape are torch's translation's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from dycl.backends.onnx_graph_values import constant, is_none, scalar_type

Symbolic = Callable[..., Any]
_TYPES = {"Float": torch.float32, "Double": torch.float64}


def _static_length(x) -> int | None:
    kind = x.type()
    sizes = kind.varyingSizes() if isinstance(kind, torch._C.TensorType) else None
    return sizes[-1] if sizes and len(sizes) == 3 and isinstance(sizes[-1], int) else None


def source_weights(length: int, size: int, align_corners: bool, scale: float | None,
                   dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(i0, i1, l0, l1)`` of each of ``size`` output positions, as eager's kernel computes them."""
    if align_corners:
        ratio = (length - 1) / (size - 1) if size > 1 else 0.0
    else:
        ratio = 1.0 / scale if scale is not None and scale > 0 else length / size
    ratio_t = torch.tensor(ratio, dtype=dtype)
    where = torch.arange(size, dtype=dtype)
    if align_corners:
        source = ratio_t * where
    else:  # eager: ``ratio * (i + 0.5) - 0.5`` in float64 (ratio in the input's type), then the input's type
        wide = torch.arange(size, dtype=torch.float64)
        source = (ratio_t.double() * (wide + 0.5) - 0.5).to(dtype).clamp_min(0)
    first = source.to(torch.int64)
    second = first + (first < length - 1).to(torch.int64)
    later = (source - first.to(dtype)).clamp(0, 1)
    return first, second, 1 - later, later


def linear_like(original: Symbolic) -> Symbolic:
    """``aten::upsample_linear1d`` by eager's formula where the length is static."""

    def symbolic(g, self, output_size, *args):
        dtype, length = _TYPES.get(scalar_type(self)), _static_length(self)
        corners = constant(args[0]) if args else None
        sizes = None if is_none(output_size) else constant(output_size)
        scales = constant(args[1]) if len(args) > 1 and not is_none(args[1]) else None
        if dtype is None or length is None or not isinstance(corners, bool):
            return original(g, self, output_size, *args)
        scale = scales[0] if isinstance(scales, list) and len(scales) == 1 else None
        if isinstance(sizes, list) and len(sizes) == 1:
            size = int(sizes[0])
        elif is_none(output_size) and scale is not None:
            size = math.floor(length * scale)
        else:
            return original(g, self, output_size, *args)
        first, second, l0, l1 = source_weights(length, size, corners, scale, dtype)
        picked = [g.op("Gather", self, g.op("Constant", value_t=index), axis_i=2) for index in (first, second)]
        return g.op("Add", g.op("Mul", picked[0], g.op("Constant", value_t=l0)),
                    g.op("Mul", picked[1], g.op("Constant", value_t=l1)))

    return symbolic


WRAPPERS: dict[str, Callable[[Symbolic], Symbolic]] = {"aten::upsample_linear1d": linear_like}

__all__ = ["WRAPPERS", "source_weights"]
