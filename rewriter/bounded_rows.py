"""A static upper bound on how many rows a data-dependent tensor has: the trip bound of a
``for`` loop over it (``rewriter.unroll``).

MoE layers loop over the experts a batch hit, a collection whose length depends on the
routing but can never exceed the expert count::

    expert_mask = F.one_hot(top_k_index, num_classes=self.num_experts + 1).permute(2, 1, 0)
    expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
    for expert_idx in expert_hit: ...

``row_bound`` follows the names of such an iterable back through their definitions
(``Definitions``: every assignment in order, kept by the caller; a name in a definition
means what it meant when that definition ran, so ``m = m.permute(2, 1, 0)`` reads the
``m`` before it) and computes, per dim, an upper bound by a few rules, each stated on the upper
bounds of its operands:

- ``F.one_hot(x, num_classes=K)`` with a static ``K``: the shape of ``x`` and then ``K``
  (the rank of ``x`` may be unknown; later rules that need it take it from their own
  static arguments);
- ``x.view(*shape)`` / ``x.reshape(*shape)`` with static sizes (``-1`` unknown);
- ``x[i]`` / ``x[:, i]`` with static ints: a full slice keeps its dim, an int drops it;
- ``x.permute(*dims)``, ``x.sum(dim=...)`` / ``.any`` / ``.amax`` (without ``keepdim``),
  ``x.nonzero()`` / ``torch.nonzero(x)`` / ``torch.argwhere(x)`` (at most ``x.numel()``
  rows, ``x.dim()`` columns);
- element-wise comparisons and casts of ``x`` with a static scalar (``x > 0``,
  ``torch.greater(x, 0)``, ``x.bool()``, ``x.to(...)``): the shape of ``x``;
- a static tensor (a parameter, a buffer): its shape; an input of the root function: the sizes
  the host checks (``sizes``, ``rewriter.tensor_rows``);
- a call of an ``nn.Linear`` submodule (its own ``forward``, no hooks): the last dim is its
  ``out_features`` (the leading dims unknown).

Anything else is unknown, and an unknown bound is no bound: the loop is refused as
before. Assumes: the caller records an assignment as a definition only where it is the one
every path after it saw last, and records ``None`` (unknown) for names assigned otherwise
(under a branch, by a loop, by tuple unpacking).
Guarantees: a returned bound is never below the number of rows the iterable has at run
time, for any input that eager PyTorch accepts (a rule that takes a rank from its own
arguments only applies where eager would raise for any other rank).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import libcst as cst
import torch
from dycl.rewriter.values import Static
from dycl.rewriter.walk import descendants

#: how many definitions deep the calculus follows names
MAX_DEPTH = 32
_COMPARISONS = frozenset({"gt", "greater", "ge", "greater_equal", "lt", "less", "le", "less_equal", "eq", "ne",
                          "not_equal", "logical_not", "abs", "neg"})
_CASTS = frozenset({"bool", "float", "int", "long", "double", "half", "to", "clone", "contiguous", "detach"})
_REDUCTIONS = frozenset({"sum", "any", "all", "amax", "amin"})
_NONZERO = frozenset({"nonzero", "argwhere"})


@dataclass(frozen=True)
class Bounds:
    """Upper bounds of a tensor's dims; with ``open_prefix`` only its trailing dims are known
    (the tensor has ``len(dims)`` or more of them)."""

    dims: tuple[int | None, ...]  # None: no bound known for that dim
    open_prefix: bool = False


Evaluate = Callable[[cst.BaseExpression], Static | None]
#: ``reaches(name, time)``: whether the definition of ``name`` made at ``time`` reaches the statement
#: being walked on every path (it was walked in a block enclosing that statement)
Reaches = Callable[[str, int], bool]


class Definitions:
    """The assignments of one function body so far, in order: ``(time, value)`` per name."""

    def __init__(self) -> None:
        self._history: dict[str, list[tuple[int, cst.BaseExpression | None]]] = {}
        self.now = 0

    def assign(self, name: str, value: cst.BaseExpression | None) -> None:
        self.now += 1
        self._history.setdefault(name, []).append((self.now, value))

    def before(self, name: str, time: int) -> tuple[int, cst.BaseExpression | None]:
        """The definition of ``name`` that was current just before ``time``, and its own time."""
        for when, value in reversed(self._history.get(name, [])):
            if when < time:
                return when, value
        return 0, None


def row_bound(node: cst.BaseExpression, calculus: Calculus) -> int | None:
    """A static upper bound on ``len(node)`` (its first dim) where it is read now, or None."""
    bounds = calculus.bounds(node, 0, calculus.definitions.now + 1)
    if bounds is None or bounds.open_prefix or not bounds.dims:
        return None
    return bounds.dims[0]  # None where unknown


class Calculus:
    """Shape bounds of expressions read now (module note); ``rewriter.trip_bounds`` extends it to values."""

    def __init__(self, definitions: Definitions, evaluate: Evaluate, reaches: Reaches | None = None,
                 sizes: dict[str, tuple[int | None, ...]] | None = None) -> None:
        self.definitions = definitions
        self.evaluate = evaluate
        self.reaches = reaches or (lambda name, time: True)
        self.sizes = sizes or {}  # the root's inputs: their sizes the host checks (RewriteContext.input_sizes)
        self.time = 0  # when the expression being read was evaluated

    def definition(self, name: str) -> tuple[int, cst.BaseExpression | None]:
        """The definition of ``name`` current at ``self.time`` and its time; ``None`` as the value where
        it is unknown or may not reach here on every path."""
        when, defined = self.definitions.before(name, self.time)
        return (when, defined) if defined is not None and self.reaches(name, when) else (when, None)

    def through_definition(self, name: str, read: Callable[[cst.BaseExpression, int], Any], depth: int) -> Any:
        """``read(definition, depth + 1)`` of ``name``'s definition current now, read at its own time;
        None where the definition is unknown (``definition``)."""
        when, defined = self.definition(name)
        if defined is None:
            return None
        outer, self.time = self.time, when
        try:
            return read(defined, depth + 1)
        finally:
            self.time = outer

    def bounds(self, node: cst.BaseExpression, depth: int, time: int | None = None) -> Bounds | None:
        if time is not None:
            self.time = time
        if depth > MAX_DEPTH:
            return None
        static = self._static(node) if not isinstance(node, cst.Name) or self._undefined(node.value) else None
        if static is not None:
            return Bounds(tuple(static.value.shape)) if isinstance(static.value, torch.Tensor) else None
        if isinstance(node, cst.Name) and self._undefined(node.value):
            return Bounds(self.sizes[node.value]) if node.value in self.sizes else None
        if isinstance(node, cst.Name):
            return self.through_definition(node.value, self.bounds, depth)
        if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
            return self._elementwise(node.left, node.comparisons[0].comparator, depth)
        if isinstance(node, cst.Subscript):
            return self._indexed(node, depth)
        if isinstance(node, cst.Call):
            return self._call(node, depth)
        return None

    def _static(self, node: cst.BaseExpression) -> Static | None:
        """``node``'s static value, where no name in it was assigned between then and now."""
        now = self.definitions.now + 1
        names = [n.value for n in [node, *descendants(node)] if isinstance(n, cst.Name)]
        if any(self.definitions.before(name, now) != self.definitions.before(name, self.time) for name in names):
            return None
        return self.evaluate(node)

    def _undefined(self, name: str) -> bool:
        """A name no assignment of this body bound before now (a global, ``self``)."""
        return self.definitions.before(name, self.time) == (0, None)

    def _elementwise(self, tensor: cst.BaseExpression, other: cst.BaseExpression | None, depth: int) -> Bounds | None:
        if other is not None:
            scalar = self._static(other)
            if scalar is None or not isinstance(scalar.value, (int, float, bool)):
                return None
        return self.bounds(tensor, depth + 1)

    def _call(self, call: cst.Call, depth: int) -> Bounds | None:
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        if any(a.star for a in call.args):
            return None
        if isinstance(call.func, cst.Attribute) and self._static(call.func.value) is None:
            # a method of a dynamic tensor: the receiver is its first operand
            return self._operator(call.func.attr.value, [call.func.value, *positional], keywords, depth)
        function = self._static(call.func)
        if function is None:
            return None
        value = function.value
        if value is torch.nn.functional.one_hot:
            return self._one_hot(positional, keywords, depth)
        if _plain_linear(value):
            return Bounds((value.out_features,), open_prefix=True)
        name = getattr(value, "__name__", "")
        if name and getattr(torch, name, None) is value:  # torch.nonzero(x), torch.greater(x, 0)
            return self._operator(name, positional, keywords, depth)
        return None

    def _operator(self, name: str, operands: list[cst.BaseExpression], keywords: dict[str, cst.BaseExpression],
                  depth: int) -> Bounds | None:
        if not operands:
            return None
        if name in _COMPARISONS:
            return self._elementwise(operands[0], operands[1] if len(operands) > 1 else keywords.get("other"), depth)
        if name in _CASTS:
            return self.bounds(operands[0], depth + 1)
        if name in _NONZERO and len(operands) == 1 and not keywords:
            inner = self.bounds(operands[0], depth + 1)
            if inner is None or inner.open_prefix or None in inner.dims:
                return None
            return Bounds((math.prod(inner.dims), len(inner.dims)))
        if name == "permute":
            return self._permute(operands, depth)
        if name in ("view", "reshape"):
            shape = self._static_ints(operands[1:])
            return None if shape is None else Bounds(tuple(None if size == -1 else size for size in shape))
        if name in _REDUCTIONS:
            return self._reduce(operands, keywords, depth)
        return None

    def _indexed(self, node: cst.Subscript, depth: int) -> Bounds | None:
        """``t[i]``, ``t[:, i]``: a static int drops its dim, a full slice keeps it."""
        inner = self.bounds(node.value, depth + 1)
        if inner is None or inner.open_prefix or len(node.slice) > len(inner.dims):
            return None
        kept = []
        for position, element in enumerate(node.slice):
            part = element.slice
            if isinstance(part, cst.Slice) and part.lower is None and part.upper is None and part.step is None:
                kept.append(inner.dims[position])
            elif not isinstance(part, cst.Index) or self._static_ints([part.value]) is None or len(
                    self._static_ints([part.value])) != 1 or not isinstance(self._static(part.value).value, int):
                return None
        return Bounds((*kept, *inner.dims[len(node.slice):]))

    def _static_ints(self, nodes: list[cst.BaseExpression]) -> tuple[int, ...] | None:
        values = []
        for node in nodes:
            static = self._static(node)
            if static is None:
                return None
            value = static.value
            items = value if isinstance(value, (tuple, list)) else (value,)
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
                return None
            values += list(items)
        return tuple(values)

    def _one_hot(self, positional: list[cst.BaseExpression], keywords: dict[str, cst.BaseExpression],
                 depth: int) -> Bounds | None:
        classes_node = positional[1] if len(positional) > 1 else keywords.get("num_classes")
        classes = self._static_ints([classes_node]) if classes_node is not None and positional else None
        if classes is None or len(classes) != 1 or classes[0] < 1:
            return None  # num_classes=-1: the count comes from the data
        inner = self.bounds(positional[0], depth + 1)
        if inner is None:
            return Bounds(classes, open_prefix=True)
        return Bounds(inner.dims + classes, inner.open_prefix)

    def _permute(self, operands: list[cst.BaseExpression], depth: int) -> Bounds | None:
        order = self._static_ints(operands[1:])
        inner = self.bounds(operands[0], depth + 1)
        if order is None or inner is None:
            return None
        known = complete(inner, len(order))
        if known is None or sorted(o % len(order) for o in order) != list(range(len(order))):
            return None
        return Bounds(tuple(known[o % len(order)] for o in order))

    def _reduce(self, operands: list[cst.BaseExpression], keywords: dict[str, cst.BaseExpression],
                depth: int) -> Bounds | None:
        keepdim = self._static(keywords["keepdim"]) if "keepdim" in keywords else Static(False, None)
        dims_node = operands[1] if len(operands) > 1 else keywords.get("dim")
        dims = self._static_ints([dims_node]) if dims_node is not None else None
        inner = self.bounds(operands[0], depth + 1)
        if keepdim is None or keepdim.value or dims is None or inner is None or inner.open_prefix:
            return None
        rank = len(inner.dims)
        if any(not -rank <= d < rank for d in dims):
            return None
        dropped = {d % rank for d in dims}
        return Bounds(tuple(size for i, size in enumerate(inner.dims) if i not in dropped))


def _plain_linear(value) -> bool:
    """An ``nn.Linear`` whose call runs ``nn.Linear.forward`` and nothing else (no hooks of its own or global)."""
    from torch.nn.modules import module as module_hooks

    return (isinstance(value, torch.nn.Linear) and type(value).forward is torch.nn.Linear.forward
            and not (value._forward_hooks or value._forward_pre_hooks or module_hooks._global_forward_hooks
                     or module_hooks._global_forward_pre_hooks))


def complete(bounds: Bounds, rank: int) -> tuple[int | None, ...] | None:
    """All ``rank`` dims of a tensor with ``bounds`` (None where a leading dim is unknown)."""
    if not bounds.open_prefix:
        return bounds.dims if len(bounds.dims) == rank else None
    if rank < len(bounds.dims):
        return None
    return (None,) * (rank - len(bounds.dims)) + bounds.dims


__all__ = ["Bounds", "Calculus", "Definitions", "Reaches", "complete", "row_bound"]
