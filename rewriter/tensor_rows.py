"""How many rows a ``for`` loop over a tensor of the root's inputs, or one computed from them by the rules below,
iterates (``rewriter.unroll``).

``for row in x``, ``for a, b in zip(x.unbind(1), y.unbind(1))``, ``enumerate(x[0])``: the count is a
dim of an input, static where ``dynamic=`` leaves it static (every dim but the batch, by default),
and then the host checks on every call that the input has the example's size there
(``dycl.model.dynamic``): the loop unrolls to that size. A dim ``dynamic=`` makes symbolic has no
count to unroll to: ``rows`` names it, for the refusal.

``rows(node, calculus, sizes)`` follows ``node`` back through the names it reads (their definitions,
as ``rewriter.bounded_rows.Calculus`` reads them: where they were made, and only where they reach
the loop on every path) to a parameter of the root function the body never assigned, whose sizes
``sizes`` gives (``RewriteContext.input_sizes``: the example's, ``None`` for a symbolic dim), by
these rules, each exact:

- ``t[i]`` with a static int ``i`` (or ``t[:, i]``, ``t[i, j]``, ``t[1:]``: ints drop a dim, a full
  slice keeps it, a slice with static int bounds of a static dim is as long as Python's slice of a
  range of that size);
- ``t.unbind(d)`` / ``torch.unbind(t, d)``: a sequence of ``size(d)`` tensors;
- ``t.T`` / ``t.t()`` (2-D), ``t.transpose(a, b)``, ``t.permute(...)``: the dims reordered;
- ``t.detach()``, ``t.clone()``, ``t.contiguous()``, ``t.float()`` and other casts, ``t.relu()`` /
  ``torch.tanh(t)`` and a few other elementwise functions, ``self.act(t)`` of an ``nn.ReLU``, ``nn.GELU``,
  ``nn.Dropout`` (their exact classes): the same shape;
- ``self.proj(t)`` where ``self.proj`` is an ``nn.Linear`` (its own ``forward``): the last dim becomes
  the weight's rows (the compiled model refuses a weight of another layout);
- ``t.view(...)`` / ``t.reshape(...)`` of static ints (one ``-1``) and of symbolic dims read off a
  tensor (``b = x.size(0)``): the same symbolic dims on both sides, ``-1`` the static quotient.

``size_of`` reads a size the same way (``t.size(d)``, ``t.shape[d]``, ``len(t)``, and ``+ - * //``
of such sizes and static ints): ``range`` of it unrolls exactly, without a guard per iteration.

Assumes: ``sizes`` holds only the root's tensor parameters, with a static size only where the
compiled model refuses a call whose input has another size there, and none where the root's body
changes a shape in place (``reshapes_in_place``: the rewrite then gives no sizes, and where a
function it rewrote does, ``rewrite`` starts again without them). Guarantees: a returned int is the
number of rows ``node`` has on every call the compiled model accepts.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import libcst as cst
import torch
from dycl.rewriter.bounded_rows import MAX_DEPTH, Calculus
from dycl.rewriter.walk import descendants

_EXACT_ARITHMETIC = {cst.Add: operator.add, cst.Subtract: operator.sub, cst.Multiply: operator.mul,
                     cst.FloorDivide: operator.floordiv}
_RESHAPING_IN_PLACE = frozenset({"unsqueeze_", "squeeze_", "t_", "transpose_", "swapdims_", "swapaxes_", "resize_",
                                 "resize_as_", "set_", "as_strided_"})
_SAME_SHAPE = frozenset({"detach", "clone", "contiguous", "float", "double", "half", "bfloat16", "long", "int",
                         "bool", "to", "cpu", "relu", "tanh", "sigmoid", "abs", "neg", "exp"})
_SAME_SHAPE_MODULES = (torch.nn.ReLU, torch.nn.GELU, torch.nn.Tanh, torch.nn.Sigmoid, torch.nn.SiLU, torch.nn.Dropout,
                       torch.nn.Identity, torch.nn.LeakyReLU)


@dataclass(frozen=True)
class SymbolicDim:
    """A dim of an input that ``dynamic=`` makes symbolic: ``input``'s dim ``axis``."""

    input: str
    axis: int


Shape = tuple[int | SymbolicDim, ...]


def rows(node: cst.BaseExpression, calculus: Calculus, sizes: dict[str, tuple[int | None, ...]]
         ) -> int | SymbolicDim | None:
    """The number of items iterating ``node`` gives (a static count, the symbolic dim it is, or None
    where ``node`` is not a tensor of the inputs that these rules follow)."""
    shape = _Shapes(calculus, sizes).shape(node, 0, calculus.definitions.now + 1)
    return shape[0] if shape else None


def size_of(node: cst.BaseExpression, calculus: Calculus, sizes: dict[str, tuple[int | None, ...]]) -> int | None:
    """``node``'s value where it is exactly a static size of an input's dim: ``t.size(d)``,
    ``t.shape[d]``, ``len(t)`` (``t`` as ``rows`` follows it), through the names bound to one."""
    return _Shapes(calculus, sizes).size(node, 0, calculus.definitions.now + 1)


class _Shapes:
    def __init__(self, calculus: Calculus, sizes: dict[str, tuple[int | None, ...]]) -> None:
        self.calculus = calculus
        self.sizes = sizes

    def shape(self, node: cst.BaseExpression, depth: int, time: int | None = None) -> Shape | None:
        calculus = self.calculus
        if time is not None:
            calculus.time = time
        if depth > MAX_DEPTH:
            return None
        if isinstance(node, cst.Name):
            if calculus._undefined(node.value):
                known = self.sizes.get(node.value)
                return None if known is None else tuple(
                    SymbolicDim(node.value, axis) if size is None else size for axis, size in enumerate(known))
            return calculus.through_definition(node.value, self.shape, depth)
        if isinstance(node, cst.Subscript):
            return self._subscript(node, depth)
        if isinstance(node, cst.Attribute) and node.attr.value == "T":
            inner = self.shape(node.value, depth + 1)
            return inner[::-1] if inner is not None and len(inner) == 2 else None
        if isinstance(node, cst.Call) and not any(a.star for a in node.args):
            return self._call(node, depth)
        return None

    def size(self, node: cst.BaseExpression, depth: int, time: int | None = None) -> int | None:
        calculus = self.calculus
        if time is not None:
            calculus.time = time
        if depth > MAX_DEPTH:
            return None
        if isinstance(node, cst.Name) and not calculus._undefined(node.value):
            return calculus.through_definition(node.value, self.size, depth)
        if isinstance(node, cst.BinaryOperation) and type(node.operator) in _EXACT_ARITHMETIC:
            return self._arithmetic(node, depth)
        tensor, dim = _size_read(node, calculus)
        if tensor is None:
            return None
        shape = self.shape(tensor, depth + 1)
        if shape is None or not -len(shape) <= dim < len(shape):
            return None
        size = shape[dim]
        return size if isinstance(size, int) else None

    def _arithmetic(self, node: cst.BinaryOperation, depth: int) -> int | None:
        """``size - 1``, ``size // 2``, ``2 * size``: a size and a static int, or two sizes."""
        operands = []
        for side in (node.left, node.right):
            static = self.calculus._static(side)
            operands.append(static.value if static is not None and _plain_int(static.value)
                            else self.size(side, depth + 1))
        left, right = operands
        if left is None or right is None or (isinstance(node.operator, cst.FloorDivide) and right == 0):
            return None
        return _EXACT_ARITHMETIC[type(node.operator)](left, right)

    def _subscript(self, node: cst.Subscript, depth: int) -> Shape | None:
        inner = self.shape(node.value, depth + 1)
        if inner is None or len(node.slice) > len(inner):
            return None
        kept: list[int | SymbolicDim] = []
        for position, element in enumerate(node.slice):
            part = element.slice
            if isinstance(part, cst.Slice):
                size = self._sliced(part, inner[position])
                if size is None:
                    return None
                kept.append(size)
                continue
            index = self.calculus._static(part.value) if isinstance(part, cst.Index) else None
            if index is None or not _plain_int(index.value):
                return None  # a slice with bounds, a tensor index, None (a new dim), ...
        return (*kept, *inner[len(node.slice):])

    def _sliced(self, part: cst.Slice, size: int | SymbolicDim) -> int | SymbolicDim | None:
        """The size of a dim of ``size`` sliced by ``part``: a full slice keeps it (symbolic or not);
        static int bounds give ``len(range(size)[part])`` on a static size."""
        if part.lower is None and part.upper is None and part.step is None:
            return size
        bounds = [None if b is None else self.calculus._static(b) for b in (part.lower, part.upper, part.step)]
        if isinstance(size, SymbolicDim) or any(
                b is not None and (bound is None or not _plain_int(bound.value))
                for b, bound in zip((part.lower, part.upper, part.step), bounds)):
            return None
        lower, upper, step = (None if bound is None else bound.value for bound in bounds)
        if step is not None and step < 1:
            return None  # a tensor takes no negative step; eager raises
        return len(range(size)[slice(lower, upper, step)])

    def _call(self, call: cst.Call, depth: int) -> Shape | None:
        positional = [a.value for a in call.args if a.keyword is None]
        keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        if isinstance(call.func, cst.Attribute) and self.calculus._static(call.func.value) is None:
            name, operands = call.func.attr.value, [call.func.value, *positional]
        else:
            function = self.calculus._static(call.func)
            if function is not None and _plain_linear(function.value) and len(positional) == 1 and not keywords:
                inner = self.shape(positional[0], depth + 1)
                weight = function.value.weight
                return (*inner[:-1], weight.shape[0]) if inner and inner[-1] == weight.shape[1] else None
            if function is not None and type(function.value) in _SAME_SHAPE_MODULES and len(positional) == 1 \
                    and not keywords:
                return self.shape(positional[0], depth + 1)
            name = getattr(function.value, "__name__", "") if function is not None else ""
            if not name or getattr(torch, name, None) is not function.value:
                return None
            operands = positional
        if not operands:
            return None
        if name in _SAME_SHAPE:
            return self.shape(operands[0], depth + 1)
        if name in ("view", "reshape") and isinstance(call.func, cst.Attribute) and not keywords:
            return self._reshaped(operands[0], operands[1:], depth)
        inner = self.shape(operands[0], depth + 1)
        numbers = self._ints([*operands[1:], *([keywords["dim"]] if "dim" in keywords else [])])
        if inner is None or numbers is None or any(k not in ("dim",) for k in keywords):
            return None
        if name == "unbind" and len(numbers) <= 1:
            return _moved_first(inner, numbers[0] if numbers else 0)
        if name == "t" and not numbers and len(inner) == 2:
            return inner[::-1]
        if name == "transpose" and len(numbers) == 2 and all(-len(inner) <= d < len(inner) for d in numbers):
            order = list(range(len(inner)))
            a, b = (d % len(inner) for d in numbers)
            order[a], order[b] = order[b], order[a]
            return tuple(inner[i] for i in order)
        if name == "permute" and sorted(d % len(inner) for d in numbers) == list(range(len(inner))):
            return tuple(inner[d % len(inner)] for d in numbers)
        return None

    def _reshaped(self, tensor: cst.BaseExpression, nodes: list[cst.BaseExpression], depth: int) -> Shape | None:
        """``tensor.view(*nodes)``: each size a static int (one may be ``-1``) or a dim read off a
        tensor; the symbolic dims of both sides must be the same, so the static parts carry the rest."""
        inner = self.shape(tensor, depth + 1)
        if inner is None or not nodes:
            return None
        if len(nodes) == 1:
            static = self.calculus._static(nodes[0])
            if static is not None and isinstance(static.value, (tuple, list)):
                nodes = [cst.Integer(str(v)) if _plain_int(v) and v >= 0 else None for v in static.value]
                if None in nodes:
                    return None
        wanted = [self._dim(node, depth + 1) for node in nodes]
        if any(w is None for w in wanted) or wanted.count(-1) > 1 or any(
                isinstance(w, int) and w < -1 for w in wanted):
            return None
        symbolic_in = sorted((d.input, d.axis) for d in inner if isinstance(d, SymbolicDim))
        symbolic_out = sorted((d.input, d.axis) for d in wanted if isinstance(d, SymbolicDim))
        if symbolic_in != symbolic_out:
            return None
        total = math.prod(d for d in inner if isinstance(d, int))
        known = math.prod(d for d in wanted if isinstance(d, int) and d != -1)
        if -1 in wanted:
            if known == 0 or total == 0 or total % known:
                return None
            wanted[wanted.index(-1)] = total // known
        elif known != total:
            return None  # eager raises
        return tuple(wanted)

    def _dim(self, node: cst.BaseExpression, depth: int) -> int | SymbolicDim | None:
        """A size argument: a static int, an exact static size, or a symbolic dim read as it is."""
        static = self.calculus._static(node)
        if static is not None:
            return static.value if _plain_int(static.value) else None
        exact = self.size(node, depth)
        if exact is not None or depth > MAX_DEPTH:
            return exact
        if isinstance(node, cst.Name) and not self.calculus._undefined(node.value):
            return self.calculus.through_definition(node.value, self._dim, depth)
        tensor, dim = _size_read(node, self.calculus)
        shape = None if tensor is None else self.shape(tensor, depth + 1)
        return shape[dim] if shape is not None and -len(shape) <= dim < len(shape) else None

    def _ints(self, nodes: list[cst.BaseExpression]) -> list[int] | None:
        values: list[int] = []
        for node in nodes:
            static = self.calculus._static(node)
            if static is None:
                return None
            items = static.value if isinstance(static.value, (tuple, list)) else (static.value,)
            if not all(_plain_int(v) for v in items):
                return None
            values += list(items)
        return values


def _size_read(node: cst.BaseExpression, calculus: Calculus) -> tuple[cst.BaseExpression | None, int]:
    """``(t, d)`` where ``node`` is ``t.size(d)``, ``t.shape[d]`` or ``len(t)`` (d = 0), else ``(None, 0)``."""
    if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Attribute) and node.value.attr.value == "shape" \
            and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        dim = calculus._static(node.slice[0].slice.value)
        return (node.value.value, dim.value) if dim is not None and _plain_int(dim.value) else (None, 0)
    if not isinstance(node, cst.Call) or len(node.args) != 1 or node.args[0].keyword is not None or node.args[0].star:
        return None, 0
    if isinstance(node.func, cst.Attribute) and node.func.attr.value == "size" and calculus._static(
            node.func.value) is None:
        dim = calculus._static(node.args[0].value)
        return (node.func.value, dim.value) if dim is not None and _plain_int(dim.value) else (None, 0)
    function = calculus._static(node.func)
    return (node.args[0].value, 0) if function is not None and function.value is len else (None, 0)


def reshapes_in_place(definition: cst.FunctionDef) -> bool:
    """Whether ``definition`` calls a method that changes a tensor's shape in place (``x.unsqueeze_(0)``,
    ``resize_``): a parameter's sizes are then not the call's, whatever name it is reached by."""
    return any(isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
               and node.func.attr.value in _RESHAPING_IN_PLACE for node in descendants(definition))


def _moved_first(shape: Shape, dim: int) -> Shape | None:
    if not -len(shape) <= dim < len(shape):
        return None
    dim %= len(shape)
    return (shape[dim], *shape[:dim], *shape[dim + 1:])


def _plain_linear(module) -> bool:
    return isinstance(module, torch.nn.Linear) and type(module).forward is torch.nn.Linear.forward \
        and isinstance(module.weight, torch.Tensor) and module.weight.dim() == 2


def _plain_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


__all__ = ["SymbolicDim", "reshapes_in_place", "rows", "size_of"]
