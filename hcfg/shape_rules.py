"""Direct shape rules for the ops that dominate symbolic shape propagation.

On fake tensors with symbolic sizes every op runs through FakeTensorMode's dispatch and
a decomposition or meta function whose every step reasons about sympy expressions:
0.3-3 ms a call (measured on the zoo: 2 ms a ``conv2d``, 1 ms a ``view``, 3 ms a
``masked_fill``, 8 ms an ``lstm_cell``), thousands of calls per compilation. Their
output shapes are simple, and ``ShapeRules`` answers these ops directly:

- ``linear``, ``matmul``, eval-mode ``batch_norm``, ``layer_norm``, ``conv2d`` with int
  spatial sizes, ``lstm_cell``, ``embedding``;
- views: ``view``/``reshape`` of a contiguous tensor, ``transpose``, ``permute``,
  ``unsqueeze``, ``contiguous``, basic indexing (ints, slices, ``None``, ``...``);
- same-shape results: ``relu``, ``sigmoid``, ``softmax``/``log_softmax``, ``tril``/``triu``,
  ``float``, ``masked_fill``, ``cat``, and elementwise arithmetic and comparisons on a
  tensor and a Python number or two tensors whose shapes broadcast at every size.

A rule answers only where its result holds at every size: sizes are compared as
expressions (``_same``: the same sympy expression, so equal everywhere; never a
comparison that the shape environment would record as a guard), or checked with the
op's own ``torch._check`` so that a dim the op pins is pinned here too. It gives the
op's shape, dtype and strides (and a view's offset). Everything else (a ``-1`` whose
size is not a known expression, a mask that broadcasts only at some sizes, mixed
dtypes, a non-contiguous input where the op's output layout depends on it, unusual
ranks) goes to the op itself: a rule that returns None costs a few microseconds.

Outputs are made as meta tensors wrapped as fake tensors of the input's mode directly
(what the mode's constructors do, without their dispatch), and within one
``ShapeRules`` context one meta tensor per (dtype, sizes, strides) is wrapped again
for every output of that layout (``_new``).

Only for shape propagation: the tensors it returns hold no values.
"""

from __future__ import annotations

import contextvars
import functools
import itertools
import operator
from typing import Any

import sympy
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.overrides import TorchFunctionMode


class ShapeRules(TorchFunctionMode):
    """Answers the ops of ``_RULES`` by shape alone, each call its rule is sure of."""

    def __init__(self) -> None:
        super().__init__()
        self._made: dict[tuple, torch.Tensor] = {}
        self._tokens: list[contextvars.Token] = []

    def __enter__(self) -> ShapeRules:
        self._tokens.append(_MADE.set(self._made))
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        _MADE.reset(self._tokens.pop())

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        rule = _RULES.get(func)
        if rule is not None:
            try:
                result = rule(*args, **kwargs)
            except Exception:  # noqa: BLE001 - an unusual call (``cat(..., axis=1)``) or a failed check: the op decides
                result = None
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
    return _new(input, (*input.shape[:-1], weight.shape[0]))


def _matmul(input: Any, other: Any) -> torch.Tensor | None:
    if not (isinstance(input, torch.Tensor) and isinstance(other, torch.Tensor) and input.dim() >= 2
            and other.dim() >= 2 and input.dtype.is_floating_point and _same_dtype(input, other)):
        return None
    if not _same(input.shape[-1], other.shape[-2]):
        torch._check(input.shape[-1] == other.shape[-2])
    batch = _broadcast(input.shape[:-2], other.shape[:-2])
    if batch is None:  # sizes that broadcast only where they are equal: the op's own check pins them
        batch = torch.broadcast_shapes(input.shape[:-2], other.shape[:-2])
    return _new(input, (*batch, input.shape[-2], other.shape[-1]))


def _broadcast(a: Any, b: Any) -> list[Any] | None:
    """The broadcast of two shapes where every pair of sizes is the same expression or
    one of them is the number 1 (so at every size); None where unsure."""
    if len(a) < len(b):
        a, b = b, a
    shape = list(a[:len(a) - len(b)])
    for x, y in zip(a[len(a) - len(b):], b):
        if _same(x, y) or (type(y) is int and y == 1):
            shape.append(x)
        elif type(x) is int and x == 1:
            shape.append(y)
        else:
            return None
    return shape


def _batch_norm(input: Any, running_mean: Any, running_var: Any, weight: Any = None, bias: Any = None,
                training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> torch.Tensor | None:
    if training or not isinstance(input, torch.Tensor) or input.dim() < 2 or not input.dtype.is_floating_point:
        return None
    for stat in (running_mean, running_var, weight, bias):
        if stat is not None:
            if not isinstance(stat, torch.Tensor) or stat.dim() != 1:
                return None
            torch._check(stat.shape[0] == input.shape[1])
    fresh = _like(input)
    return torch.empty_like(input) if fresh is None else fresh


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
    fresh = _like(input)
    return torch.empty_like(input) if fresh is None else fresh


def _relu(input: Any, inplace: bool = False) -> torch.Tensor | None:
    if not isinstance(input, torch.Tensor) or not input.dtype.is_floating_point:
        return None
    if inplace:
        return input
    fresh = _like(input)
    return torch.empty_like(input) if fresh is None else fresh


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
    return _new(input, (input.shape[0], weight.shape[0], *out))


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
    return _new(hx[0], hx[0].shape), _new(hx[1], hx[1].shape)


# -- cheap outputs ---------------------------------------------------------------------------------
# A fake output made through FakeTensorMode's dispatch costs 0.3-0.6 ms with symbolic sizes (pytree
# walks, the constructor's fake implementation, stride arithmetic); a meta tensor wrapped as a fake
# one directly costs about half, and wrapping again one made earlier in the same run with the same
# size and stride expressions a tenth (a new tensor of the same metadata; fake tensors hold no data).

_CPU = torch.device("cpu")
#: the meta tensors made so far by the innermost ``ShapeRules`` context, by (mode, dtype, sizes, strides)
_MADE: contextvars.ContextVar[dict[tuple, torch.Tensor] | None] = contextvars.ContextVar("dycl_shape_rules",
                                                                                          default=None)


def _new(like: torch.Tensor, shape: Any, dtype: torch.dtype | None = None, strides: Any = None) -> torch.Tensor:
    """A tensor on ``like``'s device of ``shape`` (contiguous, or ``strides``) and ``dtype`` (``like``'s)."""
    dtype = like.dtype if dtype is None else dtype
    if not isinstance(like, FakeTensor):  # a real tensor (a rule used outside a symbolic run)
        return (torch.empty(shape, dtype=dtype, device=like.device) if strides is None
                else torch.empty_strided(shape, strides, dtype=dtype, device=like.device))
    made = _MADE.get()
    if made is None:
        return new_fake(like.fake_mode, shape, dtype, like.device, strides)
    # the mode too: the sizes' symbols are its shape environment's
    key = (id(like.fake_mode), dtype, tuple(map(_expr, shape)), None if strides is None else tuple(map(_expr, strides)))
    meta = made.get(key)
    if meta is None:
        meta = made[key] = _meta(shape, dtype, strides)
    # each wrapping is a tensor of its own (``Tensor._make_subclass``): changing one's metadata in
    # place (``unsqueeze_``) leaves the others alone
    return FakeTensor(like.fake_mode, meta, like.device)


def new_fake(mode: FakeTensorMode, shape: Any, dtype: torch.dtype, device: torch.device = _CPU,
             strides: Any = None) -> torch.Tensor:
    """``torch.empty(shape)`` (or ``empty_strided``) as a fake tensor of ``mode``, made on the
    meta device and wrapped directly: what the mode's constructor does, without its dispatch."""
    return FakeTensor(mode, _meta(shape, dtype, strides), device)


def _meta(shape: Any, dtype: torch.dtype, strides: Any = None) -> torch.Tensor:
    with torch._C._DisableTorchDispatch():
        return (torch.empty(shape, dtype=dtype, device="meta") if strides is None
                else torch.empty_strided(shape, strides, dtype=dtype, device="meta"))


def _expr(size: Any) -> Any:
    """A size as a sympy expression, for structural comparison (no guard is added)."""
    return size.node.expr if isinstance(size, torch.SymInt) else sympy.Integer(size)


def _same(a: Any, b: Any) -> bool:
    """Whether two sizes are the same expression (False where unsure: the caller falls back)."""
    if type(a) is int and type(b) is int:
        return a == b
    return isinstance(a, int | torch.SymInt) and isinstance(b, int | torch.SymInt) and _expr(a) == _expr(b)


def _is_contiguous(tensor: torch.Tensor, exactly: bool = False) -> bool:
    """Whether ``tensor.is_contiguous()`` holds at every size, decided on the stride expressions
    (the method would guard); False where unsure. As the method, the stride of a dim of size 1
    does not count; ``exactly``: it does, and the offset must be 0 (the layout a fresh
    contiguous tensor of these sizes has)."""
    if exactly and not (type(tensor.storage_offset()) is int and tensor.storage_offset() == 0):
        return False
    expected = sympy.Integer(1)
    for size, stride in zip(reversed(tensor.shape), reversed(tensor.stride())):
        if _expr(stride) != expected and (exactly or not (type(size) is int and size == 1)):
            return False
        expected = expected * _expr(size)
    return True


def _dim(dim: Any, rank: int) -> int | None:
    """``dim`` wrapped into ``range(rank)``; None if it is not an int in range."""
    if type(dim) is not int or not -max(rank, 1) <= dim < max(rank, 1):
        return None
    return dim % max(rank, 1)


# -- views -----------------------------------------------------------------------------------------


def _view(input: Any, *shape: Any) -> torch.Tensor | None:
    """``view``/``reshape`` of a contiguous tensor: any shape of the same number of elements
    is a view. The sizes must multiply to the input's element count as expressions; a -1
    is filled only where the quotient is a number or one of the given or input sizes."""
    if len(shape) == 1 and isinstance(shape[0], tuple | list | torch.Size):
        shape = tuple(shape[0])
    if not (isinstance(input, torch.Tensor) and shape and _is_contiguous(input, exactly=True)
            and all(type(s) is int or isinstance(s, torch.SymInt) for s in shape)):
        return None
    known = [s for s in shape if not (type(s) is int and s == -1)]
    if len(shape) - len(known) > 1 or any(type(s) is int and s < 1 for s in known):
        return None  # zero sizes, several -1s, negative sizes: the op decides
    numel = sympy.Mul(*(_expr(s) for s in input.shape))
    product = sympy.Mul(*(_expr(s) for s in known))
    if len(known) == len(shape):
        return _new(input, shape) if numel == product else None
    filled = _quotient(numel / product, input.shape)
    if filled is None:
        return None
    return _new(input, [filled if type(s) is int and s == -1 else s for s in shape])


def _quotient(quotient: Any, sizes: Any) -> Any:
    """The size a -1 stands for: ``quotient`` (a sympy expression) as a number, or as a
    number times a product of some of ``sizes`` (``view(b, -1)`` of ``(b, n, 12)``: 12 n),
    built from those sizes so that its expression is the same; None where it is neither
    (``numel // rest`` would be a floor division that only some sizes make exact)."""
    if quotient.is_Integer:
        return int(quotient) if quotient > 0 else None
    symbolic = [size for size in sizes if isinstance(size, torch.SymInt)]
    if len(symbolic) > 6:
        return None
    for count in range(1, len(symbolic) + 1):
        for chosen in itertools.combinations(symbolic, count):
            factor = quotient / sympy.Mul(*(size.node.expr for size in chosen))
            if factor.is_Integer and factor > 0:
                built = functools.reduce(operator.mul, chosen)
                return built if factor == 1 else int(factor) * built
    return None


def _reshape(input: Any, shape: Any) -> torch.Tensor | None:
    return _view(input, shape)


def _permuted(input: torch.Tensor, order: list[int]) -> torch.Tensor | None:
    if not (type(input.storage_offset()) is int and input.storage_offset() == 0):
        return None
    shape, strides = input.shape, input.stride()
    return _new(input, [shape[d] for d in order], strides=[strides[d] for d in order])


def _transpose(input: Any, dim0: Any, dim1: Any) -> torch.Tensor | None:
    if not isinstance(input, torch.Tensor) or input.dim() < 1:
        return None
    dim0, dim1 = _dim(dim0, input.dim()), _dim(dim1, input.dim())
    if dim0 is None or dim1 is None:
        return None
    order = list(range(input.dim()))
    order[dim0], order[dim1] = dim1, dim0
    return _permuted(input, order)


def _permute(input: Any, *dims: Any) -> torch.Tensor | None:
    if len(dims) == 1 and isinstance(dims[0], tuple | list):
        dims = tuple(dims[0])
    if not isinstance(input, torch.Tensor) or len(dims) != input.dim() or input.dim() < 1:
        return None
    order = [_dim(d, input.dim()) for d in dims]
    if None in order or len(set(order)) != len(order):
        return None
    return _permuted(input, order)


def _unsqueeze(input: Any, dim: Any) -> torch.Tensor | None:
    if not (isinstance(input, torch.Tensor) and type(input.storage_offset()) is int and input.storage_offset() == 0):
        return None
    dim = _dim(dim, input.dim() + 1)
    if dim is None:
        return None
    shape, strides = list(input.shape), list(input.stride())
    # the op's geometry (inferUnsqueezeGeometry): the new dim's stride spans the dim it precedes
    stride = 1 if dim >= input.dim() else shape[dim] * strides[dim]
    return _new(input, [*shape[:dim], 1, *shape[dim:]], strides=[*strides[:dim], stride, *strides[dim:]])


def _contiguous(input: Any, memory_format: Any = torch.contiguous_format) -> torch.Tensor | None:
    if not isinstance(input, torch.Tensor) or memory_format is not torch.contiguous_format:
        return None
    return input if _is_contiguous(input) else _new(input, input.shape)


# -- same-shape results ----------------------------------------------------------------------------


def _like(input: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor | None:
    """A fresh tensor of a contiguous ``input``'s shape (None for any other input: the op
    decides its output's strides)."""
    return _new(input, input.shape, dtype) if _is_contiguous(input) else None


def _scalar_keeps(dtype: torch.dtype, other: Any) -> bool:
    """Whether ``tensor op other`` (a Python number) keeps ``dtype`` by type promotion."""
    if type(other) is float:
        return dtype.is_floating_point
    return type(other) is int and (dtype.is_floating_point or dtype in _INTEGERS)


_INTEGERS = {torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64}


def _binary(result: str) -> Any:
    """The rule of an elementwise binary op giving ``result`` (``"same"``: the operands' dtype,
    ``"float"``: the same but only for floating operands, ``"bool"``: a comparison) on a
    contiguous tensor and a Python number, or two contiguous tensors of the same dtype whose
    shapes broadcast at every size (``_broadcast``); the result is contiguous, as the op's."""

    def rule(input: Any, other: Any, **kwargs: Any) -> torch.Tensor | None:
        if kwargs or not isinstance(input, torch.Tensor):
            return None  # alpha=, rounding_mode=, out=
        dtype = input.dtype
        if isinstance(other, torch.Tensor):
            shape = _broadcast(input.shape, other.shape)
            if other.dtype != dtype or shape is None or not (_is_contiguous(input) and _is_contiguous(other)):
                return None
            if result == "float" and not dtype.is_floating_point:
                return None
            return _new(input, shape, torch.bool if result == "bool" else None)
        if result == "bool":  # a comparison gives bools whatever the promoted type
            if type(other) not in (int, float, bool) or dtype.is_complex:
                return None
        elif not _scalar_keeps(dtype, other):
            return None
        if result == "float" and not dtype.is_floating_point:
            return None
        return _like(input, torch.bool if result == "bool" else None)

    return rule


def _masked_fill(input: Any, mask: Any, value: Any) -> torch.Tensor | None:
    if not (isinstance(input, torch.Tensor) and isinstance(mask, torch.Tensor) and mask.dtype == torch.bool
            and mask.dim() <= input.dim() and _scalar_keeps(input.dtype, value)):
        return None
    for size, mask_size in zip(reversed(input.shape), reversed(mask.shape)):
        if not (type(mask_size) is int and mask_size == 1) and not _same(size, mask_size):
            return None  # a mask that broadcasts only at some sizes: the op checks
    return _like(input)


def _softmax(input: Any, dim: Any = None, _stacklevel: int = 3, dtype: Any = None) -> torch.Tensor | None:
    """``F.softmax``/``F.log_softmax``; ``_softmax_method`` is ``Tensor.softmax``/``torch.softmax``'s signature."""
    if not isinstance(input, torch.Tensor) or not input.dtype.is_floating_point or dtype is not None or (
            _dim(dim, input.dim()) is None):
        return None
    return _like(input)


def _softmax_method(input: Any, dim: Any, dtype: Any = None) -> torch.Tensor | None:
    return _softmax(input, dim, dtype=dtype)


def _embedding(input: Any, weight: Any, padding_idx: Any = None, max_norm: Any = None, *args: Any,
               **kwargs: Any) -> torch.Tensor | None:
    if not (isinstance(input, torch.Tensor) and isinstance(weight, torch.Tensor) and input.dtype in (
            torch.int32, torch.int64) and weight.dim() == 2 and max_norm is None and kwargs.get("max_norm") is None):
        return None  # max_norm renormalises the weight in place
    return _new(input, (*input.shape, weight.shape[1]), weight.dtype)



def _cat(tensors: Any, dim: Any = 0) -> torch.Tensor | None:
    """Contiguous tensors of one dtype whose other dims are the same expressions; the
    concatenated dim is their sum (no guard: an addition of sizes decides nothing)."""
    if not (isinstance(tensors, list | tuple) and tensors and all(isinstance(t, torch.Tensor) for t in tensors)):
        return None
    first = tensors[0]
    dim = _dim(dim, first.dim())
    if dim is None or first.dim() < 1 or any(t.dtype != first.dtype or t.dim() != first.dim() for t in tensors):
        return None
    for t in tensors:
        if not _is_contiguous(t) or any(type(size) is int and size == 0 for size in t.shape) or not all(
                _same(a, b) for axis, (a, b) in enumerate(zip(t.shape, first.shape)) if axis != dim):
            return None
    total = functools.reduce(operator.add, (t.shape[dim] for t in tensors))
    return _new(first, (*first.shape[:dim], total, *first.shape[dim + 1:]))


def _stack(tensors: Any, dim: Any = 0) -> torch.Tensor | None:
    """Contiguous tensors of one dtype and the same sizes (as expressions), stacked along a new dim."""
    if not (isinstance(tensors, list | tuple) and tensors and all(isinstance(t, torch.Tensor) for t in tensors)):
        return None
    first = tensors[0]
    dim = _dim(dim, first.dim() + 1)
    if dim is None or any(t.dtype != first.dtype or t.dim() != first.dim() or not _is_contiguous(t) or not all(
            _same(a, b) for a, b in zip(t.shape, first.shape)) for t in tensors):
        return None
    return _new(first, (*first.shape[:dim], len(tensors), *first.shape[dim:]))


def _flatten(input: Any, start_dim: Any = 0, end_dim: Any = -1) -> torch.Tensor | None:
    """``flatten`` of the exactly contiguous layout (a view): the flattened size is the product
    of the sizes it joins (no guard: a product of sizes decides nothing)."""
    if not isinstance(input, torch.Tensor) or input.dim() < 2 or not _is_contiguous(input, exactly=True):
        return None
    start, end = _dim(start_dim, input.dim()), _dim(end_dim, input.dim())
    if start is None or end is None or start >= end:
        return None  # the op returns the input itself, or raises
    joined = functools.reduce(operator.mul, input.shape[start:end + 1])
    return _new(input, (*input.shape[:start], joined, *input.shape[end + 1:]))


def _adaptive_avg_pool2d(input: Any, output_size: Any) -> torch.Tensor | None:
    if not isinstance(input, torch.Tensor) or input.dim() not in (3, 4) or not input.dtype.is_floating_point:
        return None
    size = tuple(output_size) if isinstance(output_size, tuple | list) else (output_size, output_size)
    if len(size) != 2 or not all(s is None or (type(s) is int and s > 0) for s in size):
        return None
    if any(type(s) is int and s == 0 for s in input.shape[1:]):
        return None  # the op raises on an empty spatial or channel dim
    if not _is_contiguous(input):
        return None  # a channels-last input gives a channels-last output
    out = [input.shape[-2 + axis] if s is None else s for axis, s in enumerate(size)]
    return _new(input, (*input.shape[:-2], *out))


def _unary(input: Any) -> torch.Tensor | None:
    """An elementwise function of a floating tensor (``sigmoid``): the input's shape and dtype."""
    if not isinstance(input, torch.Tensor) or not input.dtype.is_floating_point:
        return None
    return _like(input)


def _triangle(input: Any, diagonal: Any = 0) -> torch.Tensor | None:
    if not isinstance(input, torch.Tensor) or input.dim() < 2 or type(diagonal) is not int:
        return None
    return _like(input)


def _float(input: Any, memory_format: Any = torch.preserve_format) -> torch.Tensor | None:
    if not isinstance(input, torch.Tensor) or memory_format is not torch.preserve_format:
        return None
    return input if input.dtype == torch.float32 else _like(input, torch.float32)  # the op returns self, too


def _getitem(input: Any, index: Any) -> torch.Tensor | None:
    """Basic indexing: ints, slices of ints, ``None`` and one ``...``. A dim whose size is a
    number is indexed as the op does (``slice.indices``); a symbolic dim only by ``:`` or,
    where its size is a bare dim symbol (at least 1 at every size), by ``0``. The result is
    the view the op makes (sizes, strides, offset), placed on a meta tensor of the input's
    layout by ``as_strided``; anything else is left to the op."""
    items = list(index) if isinstance(index, tuple) else [index]
    if not isinstance(input, torch.Tensor) or not all(map(_basic_index, items)) or items.count(Ellipsis) > 1:
        return None
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items[at:at + 1] = [slice(None)] * (input.dim() - sum(item is not None for item in items) + 1)
    if sum(item is not None for item in items) > input.dim() or type(input.storage_offset()) is not int:
        return None
    items += [slice(None)] * (input.dim() - sum(item is not None for item in items))
    shape, strides, offset, dim = [], [], input.storage_offset(), 0
    for item in items:
        if item is None:
            shape.append(1)
            # as the op's unsqueeze: the new axis spans the (not yet indexed) input dim it precedes
            strides.append(input.shape[dim] * input.stride()[dim] if dim < input.dim() else 1)
            continue
        size, stride = input.shape[dim], input.stride()[dim]
        dim += 1
        if item == slice(None):
            shape.append(size)
            strides.append(stride)
        elif type(item) is int:
            if type(size) is int and -size <= item < size:
                offset += (item % size) * stride
            elif not (item == 0 and isinstance(size, torch.SymInt) and size.node.expr.is_Symbol):
                return None
        elif type(size) is int and (item.step is None or item.step > 0):
            begin, stop, step = item.indices(size)
            shape.append(max(0, (stop - begin + step - 1) // step))
            strides.append(stride * step)
            offset += begin * stride
        else:
            return None
    if type(offset) is not int:
        return None
    mode = input.fake_mode if isinstance(input, FakeTensor) else torch._C._get_dispatch_mode(
        torch._C._TorchDispatchModeKey.FAKE)
    if mode is None:
        return None
    with torch._C._DisableTorchDispatch():
        base = torch.empty_strided(input.shape, input.stride(), dtype=input.dtype, device="meta")
        out = base.as_strided(shape, strides, offset)
    return FakeTensor(mode, out, input.device)


def _basic_index(item: Any) -> bool:
    if type(item) is slice:
        return all(bound is None or type(bound) is int for bound in (item.start, item.stop, item.step))
    return item is None or item is Ellipsis or type(item) is int

_RULES = {F.linear: _linear, torch.matmul: _matmul, torch.Tensor.matmul: _matmul, torch.Tensor.__matmul__: _matmul,
          F.batch_norm: _batch_norm, F.layer_norm: _layer_norm, F.relu: _relu, torch.relu: _relu,
          torch.Tensor.relu: _relu, F.conv2d: _conv2d, torch.lstm_cell: _lstm_cell,
          torch.Tensor.view: _view, torch.Tensor.reshape: _view, torch.reshape: _reshape,
          torch.Tensor.transpose: _transpose, torch.transpose: _transpose, torch.Tensor.permute: _permute,
          torch.permute: _permute, torch.Tensor.unsqueeze: _unsqueeze, torch.unsqueeze: _unsqueeze,
          torch.Tensor.contiguous: _contiguous, torch.Tensor.masked_fill: _masked_fill, torch.masked_fill: _masked_fill,
          F.softmax: _softmax, F.log_softmax: _softmax, torch.Tensor.softmax: _softmax_method,
          torch.softmax: _softmax_method, torch.Tensor.log_softmax: _softmax_method,
          torch.log_softmax: _softmax_method, F.embedding: _embedding, torch.cat: _cat, torch.sigmoid: _unary,
          torch.Tensor.sigmoid: _unary, torch.tril: _triangle, torch.Tensor.tril: _triangle, torch.triu: _triangle,
          torch.Tensor.triu: _triangle, torch.Tensor.float: _float, torch.Tensor.__getitem__: _getitem,
          torch.stack: _stack, torch.flatten: _flatten, torch.Tensor.flatten: _flatten,
          F.adaptive_avg_pool2d: _adaptive_avg_pool2d}
_RULES.update({method: _binary("same") for method in (torch.Tensor.add, torch.add, torch.Tensor.sub, torch.sub,
                                                       torch.Tensor.mul, torch.mul)})
_RULES.update({method: _binary("float") for method in (torch.Tensor.div, torch.div)})
_RULES.update({method: _binary("bool") for name in ("eq", "ne", "lt", "le", "gt", "ge")
               for method in (getattr(torch.Tensor, name), getattr(torch, name), getattr(torch.Tensor, f"__{name}__"))})

__all__ = ["ShapeRules", "new_fake"]
