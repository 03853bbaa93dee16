"""Exploring the branch of a size test that the example cannot take, at sizes that take it.

``if x.shape[0] == 1: h = h.squeeze(0)`` compiled from a batch of 2: run on the
example, the then-branch squeezes nothing, and every sub-DNN after it would be
compiled for a 2-D ``h``, while a call with one sample brings a 1-D one. Where a
condition's test is a relation over dim symbols (``hcfg.symbolic``) that, for the
branch's outcome, pins the symbols to sizes (``batch == 1``), the states entering
that branch are *resized* to those sizes: every tensor of the state is narrowed or
repeated along the dims that follow a pinned symbol, every number computed from
sizes recomputed, and the symbolic mirror gets the pinned sizes as static dims (on
that path they are the only sizes possible). The branch, and what follows it on
that path, is then explored with the shapes it has at run time; where the ranks
that reach a sub-DNN differ between paths, ``hcfg.variants`` compiles one variant
per rank.

Assumes: a sub-DNN's graph depends on its inputs' shapes, not their values (rows
of the example are as good an example as any: ``dycl.export.alternatives`` assumes
the same). Guarantees: a state is resized only where every tensor and number of
its mirror agrees with its concrete value at the example sizes; otherwise the
branch is explored on the example states, as before this module existed.
"""

from __future__ import annotations

from typing import Any

import sympy
import torch
from dycl.hcfg.state import PathState
from dycl.hcfg.symbolic import SymbolicScalar, SymbolicShapes, SymbolicTensor


class _Mismatch(Exception):
    """The mirror and the concrete value disagree: the state is not resized."""


def pinned_sizes(relation: sympy.Basic, outcome: bool) -> dict[sympy.Symbol, int] | None:
    """The sizes the dim symbols must have for ``relation`` to come out ``outcome``, where
    that is one positive size per symbol (``Eq(batch, 1)``, ``batch < 2``; a conjunction of
    such); else None."""
    wanted = relation if outcome else sympy.Not(relation)
    wanted = sympy.simplify_logic(wanted) if isinstance(wanted, sympy.logic.boolalg.Boolean) else wanted
    atoms = wanted.args if isinstance(wanted, sympy.And) else (wanted,)
    sizes: dict[sympy.Symbol, int] = {}
    for atom in atoms:
        if not isinstance(atom, sympy.core.relational.Relational) or len(atom.free_symbols) != 1:
            return None
        (symbol,) = atom.free_symbols
        solutions = _positive_solutions(atom, symbol)
        if solutions is None or len(solutions) != 1 or sizes.get(symbol, solutions[0]) != solutions[0]:
            return None
        sizes[symbol] = int(solutions[0])
    if not sizes or wanted.xreplace(sizes) is not sympy.true:
        return None
    return sizes


def _positive_solutions(atom: sympy.Basic, symbol: sympy.Symbol) -> list[int] | None:
    """The positive integers that satisfy ``atom`` (one relation over ``symbol``), where
    they are finitely many (``batch < 2``: [1]); None where they are not, or unknown."""
    try:
        if isinstance(atom, sympy.Eq):
            return [int(value) for value in sympy.solve(atom, symbol) if value.is_integer and value > 0]
        if isinstance(atom, sympy.Ne):
            return None
        region = sympy.solve_univariate_inequality(atom, symbol, relational=False).intersect(
            sympy.Interval(1, sympy.oo))
    except (NotImplementedError, TypeError, ValueError):
        return None
    if region.is_empty:
        return []
    if not region.sup.is_finite or region.sup - region.inf > 64:
        return None
    return [value for value in range(int(sympy.ceiling(region.inf)), int(sympy.floor(region.sup)) + 1)
            if region.contains(value) is sympy.true]


def resized(path: PathState, sizes: dict[sympy.Symbol, int], shapes: SymbolicShapes) -> PathState | None:
    """``path`` with its dim symbols at ``sizes`` (see the module note); None where its
    mirror does not describe its concrete values."""
    if path.symbolic is None:
        return None
    before = dict(shapes.examples)
    after = {**before, **sizes}
    concrete, mirror = dict(path.concrete), dict(path.symbolic)
    try:
        for name, shadow in path.symbolic.items():
            if name in path.concrete and _described(shadow):
                concrete[name], mirror[name] = _resize(path.concrete[name], shadow, before, after, sizes)
    except _Mismatch:
        return None
    return PathState(concrete, mirror).fork()


def _described(value: Any) -> bool:
    if isinstance(value, list | tuple):
        return any(_described(item) for item in value)
    return isinstance(value, SymbolicTensor | SymbolicScalar)


def _size(expr: Any, sizes: dict[sympy.Symbol, int]) -> int:
    value = sympy.sympify(sympy.sympify(expr).xreplace(sizes))
    if not value.is_Integer:
        raise _Mismatch(f"not a size: {expr}")
    return int(value)


def _static(expr: Any, sizes: dict[sympy.Symbol, int]) -> Any:
    value = sympy.sympify(sympy.sympify(expr).xreplace(sizes))
    return int(value) if value.is_Integer else value


def _resize(value: Any, shadow: Any, before: dict, after: dict, pinned: dict) -> tuple[Any, Any]:
    """The concrete value and its mirror at ``after`` (both given at ``before``)."""
    if isinstance(shadow, SymbolicTensor):
        if not isinstance(value, torch.Tensor) or value.dim() != len(shadow.shape):
            raise _Mismatch("a tensor of another rank")
        if [_size(s, before) for s in shadow.shape] != list(value.shape):
            raise _Mismatch("a tensor of another shape")
        for axis, size in enumerate(shadow.shape):
            value = _resize_axis(value, axis, _size(size, after))
        return value, SymbolicTensor(tuple(_static(s, pinned) for s in shadow.shape), shadow.dtype)
    if isinstance(shadow, SymbolicScalar):
        if type(value) not in (int, float, bool) or sympy.sympify(shadow.expr).xreplace(before) != value:
            raise _Mismatch("a number that is not its expression")
        number = sympy.sympify(sympy.sympify(shadow.expr).xreplace(after))
        result = bool(number) if type(value) is bool else int(number) if number.is_Integer else float(number)
        return result, SymbolicScalar(sympy.sympify(shadow.expr).xreplace(pinned))
    if isinstance(shadow, list | tuple):
        if not isinstance(value, list | tuple) or len(value) != len(shadow) or hasattr(value, "_fields"):
            raise _Mismatch("a container of another structure")
        pairs = [_resize(v, s, before, after, pinned) for v, s in zip(value, shadow)]
        return type(value)(v for v, _ in pairs), type(shadow)(s for _, s in pairs)
    return value, shadow


def _resize_axis(tensor: torch.Tensor, axis: int, size: int) -> torch.Tensor:
    """``tensor`` narrowed, or repeated cyclically, to ``size`` along ``axis``."""
    current = tensor.shape[axis]
    if size == current:
        return tensor
    if current == 0:
        raise _Mismatch("no rows to repeat")
    if size < current:
        return tensor.narrow(axis, 0, size).clone()
    return tensor.index_select(axis, torch.arange(size) % current)


__all__ = ["pinned_sizes", "resized"]
