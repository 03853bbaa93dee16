"""Direct shape rules for the ops that dominate symbolic shape propagation.

On fake tensors with symbolic sizes, ``linear``, ``matmul``, ``batch_norm``,
``layer_norm``, ``relu``, ``conv2d`` and ``lstm_cell`` run through decompositions or meta
functions whose every step reasons about sympy expressions (8 ms for one
``linear`` on a 3-d input; measured on the zoo: 2 ms a ``conv2d``, 1.9 ms a
``relu``, 8 ms an ``lstm_cell``). Their output shapes are simple: ``linear`` replaces the last dim by
``weight``'s rows, ``matmul`` (both operands at least 2-d) broadcasts the batch
dims and takes rows from the first and columns from the second, the two
normalisations and ``relu`` keep their input's shape, and ``conv2d`` with int
spatial sizes computes each output size from the kernel, stride, padding and
dilation as the op does (a symbolic spatial size is left to the op), and
``lstm_cell`` gives back two tensors of its hidden state's shape.
``ShapeRules`` answers them directly, with the same checks the ops make
(``torch._check``, so that a dim those checks pin is pinned here too), and leaves
every other call, and every call it is unsure of (training-mode batch norm, mixed
dtypes, unusual ranks), to the op itself.

Only for shape propagation: the tensors it returns hold no values.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode


class ShapeRules(TorchFunctionMode):
    """Answers ``linear``, ``matmul``, eval-mode ``batch_norm`` and ``layer_norm`` by shape alone."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        rule = _RULES.get(func)
        if rule is not None:
            result = rule(*args, **kwargs)
            if result is not None:
                return result
        return func(*args, **kwargs)


def _same_dtype(*tensors: torch.Tensor | None) -> bool:
    present = [t for t in tensors if t is not None]
    return all(isinstance(t, torch.Tensor) for t in present) and len({t.dtype for t in present}) == 1


def _linear(input: Any, weight: Any, bias: Any = None) -> torch.Tensor | None:
    if not (isinstance(input, torch.Tensor) and isinstance(weight, torch.Tensor) and input.dim() >= 1
            and weight.dim() == 2 and input.dtype.is_floating_point and _same_dtype(input, weight, bias)):
        return None
    torch._check(input.shape[-1] == weight.shape[1])
    if bias is not None:
        if bias.dim() != 1:
            return None
        torch._check(bias.shape[0] == weight.shape[0])
    return input.new_empty((*input.shape[:-1], weight.shape[0]))


def _matmul(input: Any, other: Any) -> torch.Tensor | None:
    if not (isinstance(input, torch.Tensor) and isinstance(other, torch.Tensor) and input.dim() >= 2
            and other.dim() >= 2 and input.dtype.is_floating_point and _same_dtype(input, other)):
        return None
    torch._check(input.shape[-1] == other.shape[-2])
    batch = torch.broadcast_shapes(input.shape[:-2], other.shape[:-2])
    return input.new_empty((*batch, input.shape[-2], other.shape[-1]))


def _batch_norm(input: Any, running_mean: Any, running_var: Any, weight: Any = None, bias: Any = None,
                training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> torch.Tensor | None:
    if training or not isinstance(input, torch.Tensor) or input.dim() < 2 or not input.dtype.is_floating_point:
        return None
    for stat in (running_mean, running_var, weight, bias):
        if stat is not None:
            if not isinstance(stat, torch.Tensor) or stat.dim() != 1:
                return None
            torch._check(stat.shape[0] == input.shape[1])
    return torch.empty_like(input)


def _layer_norm(input: Any, normalized_shape: Any, weight: Any = None, bias: Any = None,
                eps: float = 1e-5) -> torch.Tensor | None:
    if not isinstance(input, torch.Tensor) or not input.dtype.is_floating_point:
        return None
    shape = tuple(normalized_shape) if isinstance(normalized_shape, (tuple, list, torch.Size)) else (
        normalized_shape,)
    if input.dim() < len(shape) or not all(isinstance(size, int) for size in shape):
        return None
    for size, dim in zip(shape, input.shape[input.dim() - len(shape):]):
        torch._check(dim == size)
    for affine in (weight, bias):
        if affine is not None and (not isinstance(affine, torch.Tensor) or tuple(affine.shape) != shape):
            return None
    return torch.empty_like(input)


def _relu(input: Any, inplace: bool = False) -> torch.Tensor | None:
    if not isinstance(input, torch.Tensor) or not input.dtype.is_floating_point:
        return None
    return input if inplace else torch.empty_like(input)


def _pair(value: Any) -> tuple[int, int] | None:
    pair = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    return pair if len(pair) == 2 and all(type(v) is int for v in pair) else None


def _conv2d(input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
            groups: int = 1) -> torch.Tensor | None:
    if not (isinstance(input, torch.Tensor) and isinstance(weight, torch.Tensor) and input.dim() == 4
            and weight.dim() == 4 and input.dtype.is_floating_point and _same_dtype(input, weight, bias)
            and type(groups) is int and groups >= 1):
        return None
    stride, padding, dilation = _pair(stride), _pair(padding), _pair(dilation)  # a string padding: None
    if stride is None or padding is None or dilation is None or min(stride) < 1 or min(padding) < 0 or (
            min(dilation) < 1):
        return None
    height, width = input.shape[2:]
    kernel = tuple(weight.shape[2:])
    if not all(type(size) is int for size in (height, width, *kernel, weight.shape[0], weight.shape[1])):
        return None  # a symbolic spatial size or kernel: the op's own checks decide
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != weight.shape[0]):
        return None
    if weight.shape[0] % groups:
        return None
    torch._check(input.shape[1] == weight.shape[1] * groups)
    out = [(size + 2 * pad - dil * (k - 1) - 1) // step + 1
           for size, k, step, pad, dil in zip((height, width), kernel, stride, padding, dilation)]
    if min(out) < 1:
        return None  # the op raises its own error
    return input.new_empty((input.shape[0], weight.shape[0], *out))


def _lstm_cell(input: Any, hx: Any, w_ih: Any, w_hh: Any, b_ih: Any = None, b_hh: Any = None) -> Any:
    if not (isinstance(hx, (tuple, list)) and len(hx) == 2 and all(isinstance(t, torch.Tensor) and t.dim() == 2
                                                                   for t in (input, *hx, w_ih, w_hh))
            and input.dtype.is_floating_point and _same_dtype(input, *hx, w_ih, w_hh, b_ih, b_hh)):
        return None
    gates = 4 * w_hh.shape[1]
    if not all(type(size) is int for size in (*w_ih.shape, *w_hh.shape)) or w_ih.shape[0] != gates or (
            w_hh.shape[0] != gates) or any(b is not None and tuple(b.shape) != (gates,) for b in (b_ih, b_hh)):
        return None
    torch._check(input.shape[1] == w_ih.shape[1])
    for state in hx:
        torch._check(state.shape[0] == input.shape[0])
        torch._check(state.shape[1] == w_hh.shape[1])
    return hx[0].new_empty(hx[0].shape), hx[1].new_empty(hx[1].shape)


_RULES = {F.linear: _linear, torch.matmul: _matmul, torch.Tensor.matmul: _matmul, torch.Tensor.__matmul__: _matmul,
          F.batch_norm: _batch_norm, F.layer_norm: _layer_norm, F.relu: _relu, torch.relu: _relu,
          torch.Tensor.relu: _relu, F.conv2d: _conv2d, torch.lstm_cell: _lstm_cell}

__all__ = ["ShapeRules"]
