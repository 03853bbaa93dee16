"""Operators whose fake (meta) kernel refuses calls their CPU kernel accepts, run as a
decomposition while dycl runs code on fake tensors (the shape-guard run, ``dycl.export.shape_guards``).

- ``torch._grouped_mm(a, b, offs=offs)`` (``F.grouped_mm``; transformers 5's default
  experts on CPU): torch's meta kernel accepts bfloat16 only, the CPU kernel float32 too,
  so the fake run of every float32 MoE failed and no guard could be found. The
  decomposition computes what the kernel computes for every row before ``offs[-1]``:
  row ``i`` of a 2-D ``a`` times ``b[g]``, ``g = #{offs <= i}`` (the ONNX translation in
  ``dycl.backends.onnx_symbolics`` is the same), so its output has the kernel's shape
  and dtype for any symbolic row count.

Assumes: used only around fake runs, whose results are shapes and guards, never values.
Guarantees: ``meta_tolerant_ops()`` is a ``TorchFunctionMode`` active for its ``with``
block only; every other call runs unchanged.
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode


def grouped_mm_decomposed(mat_a: torch.Tensor, mat_b: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    """``torch._grouped_mm(mat_a, mat_b, offs=offs)`` for a 2-D ``mat_a`` and a 3-D ``mat_b``."""
    row = torch.arange(mat_a.shape[0], device=mat_a.device)
    group = (offs.to(torch.int64).unsqueeze(0) <= row.unsqueeze(1)).sum(dim=1).clamp(max=mat_b.shape[0] - 1)
    return torch.bmm(mat_a.unsqueeze(1), mat_b[group]).squeeze(1)


def _plain_grouped_mm(args: tuple, kwargs: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    names = ("mat_a", "mat_b", "offs", "bias", "out_dtype")
    bound = dict(zip(names, args)) | kwargs
    mat_a, mat_b, offs = bound.get("mat_a"), bound.get("mat_b"), bound.get("offs")
    if bound.get("bias") is not None or bound.get("out_dtype") is not None or offs is None:
        return None
    if not (isinstance(mat_a, torch.Tensor) and mat_a.dim() == 2 and isinstance(mat_b, torch.Tensor)
            and mat_b.dim() == 3):
        return None
    return mat_a, mat_b, offs


class meta_tolerant_ops(TorchFunctionMode):  # noqa: N801 - used as a context manager, named like one
    """Runs the operators of the module note as their decompositions."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch._grouped_mm, getattr(torch.nn.functional, "grouped_mm", None)):
            plain = _plain_grouped_mm(args, kwargs)
            if plain is not None:
                return grouped_mm_decomposed(*plain)
        return func(*args, **kwargs)


__all__ = ["grouped_mm_decomposed", "meta_tolerant_ops"]
