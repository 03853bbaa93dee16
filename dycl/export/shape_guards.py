"""The shape conditions under which one exported sub-DNN graph is valid.

Library code exported as one graph may decide on sizes in Python
(``is_causal = q_len > 1 and mask is None`` in transformers' attention). The
TorchScript tracer keeps the example's outcome of every such ``bool()``; where
a decided size is a symbolic dim, the graph is right only for sizes that decide
the same way. ``guards_of`` finds those conditions the way ``torch.export``
does: it runs the sub-DNN on fake tensors whose symbolic dims are
``ShapeEnv`` symbols with the example's sizes as hints, and reads the guards
the shape environment recorded (``s0 > 1``). The host checks them on every call
(``hostgen.manifest.ShapeGuard``) and refuses sizes that would take another
path, naming the line that decided.

Assumes: the sub-DNN's Python code is a function of its inputs' shapes and
dtypes and of compiled-in values, and takes the same path on fake tensors as on
real ones of the same shapes (true of code that reads no tensor values; a value
read makes the fake run fail, and then no guards are returned). The hints are
the exact sizes of the example the graph is traced at, so each guard holds on
the example.

Guarantees: for input shapes where every returned guard holds (and every dim
is at least 1, which the symbols assume), each Python decision on a symbolic
dim made while tracing comes out as on the example. A dim that torch's own
shape rules fix while the fake run goes on (they treat a size of 1 apart, as
``torch.export`` does) gets the guard ``dim == size``: every later decision on
it is made on a plain number, invisible here. ``None`` where that cannot
be shown: the fake run failed, or a guard uses an operation the host's checker
does not evaluate.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import sympy
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv
from torch.utils._sympy.functions import FloorDiv, Max, Min, Mod, PythonMod

from dycl.export.fake_decompositions import meta_tolerant_ops
from dycl.hcfg.symbolic import _DimSource
from dycl.hostgen.manifest import ShapeGuard

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


def guards_of(module: torch.nn.Module, example: Sequence[Any], input_names: Sequence[str],
              dynamic_axes: Mapping[str, Mapping[int, str]], decided_at: str = "an unknown line",
              ) -> tuple[ShapeGuard, ...] | None:
    """The conditions that keep every Python ``bool()`` of a symbolic size made by
    code outside torch while ``module`` runs on ``example`` (its flat inputs, named
    ``input_names``) with the axes in ``dynamic_axes`` symbolic; None where they
    cannot be found or checked by the host (see the module note). A dim that torch's
    own shape rules fix to its size (a size of 1 is treated apart: broadcasting,
    strides) hides every later decision on it, so the graph is kept to that size;
    ``decided_at`` names the line the trace decided at, for that guard's message."""
    env = _DecisionEnv()
    mode = FakeTensorMode(shape_env=env, allow_non_fake_inputs=True)
    mode.cache_enabled = False
    fakes, symbols, bound = _fake_inputs(env, mode, example, input_names, dynamic_axes)
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    was_disabled, logger.disabled = logger.disabled, True  # a failing op is an outcome here, not the user's problem
    try:
        with mode, torch.no_grad(), meta_tolerant_ops():
            module(*fakes)
    except Exception:  # noqa: BLE001 - any failure: the guards are unknown
        return None
    finally:
        logger.disabled = was_disabled
    names = {symbol: dim if dim.isidentifier() and dim not in ("min", "max") else f"d{index}"
             for index, (dim, symbol) in enumerate(symbols.items())}
    by_name = {names[symbol]: bound[dim] for dim, symbol in symbols.items()}
    guards: dict[str, ShapeGuard] = {}
    for dim, symbol in symbols.items():
        fixed = env.simplify(symbol)
        if fixed.is_number:
            text = f"({names[symbol]} == {int(fixed)})"
            guards[text] = ShapeGuard(text, {names[symbol]: bound[dim]}, decided_at)
    for expr, outcome, where in env.decisions:
        condition = expr if outcome else sympy.Not(expr)
        if condition is sympy.true:
            continue
        text = python_condition(condition, names)
        if text is None or condition is sympy.false:
            return None
        used = sorted(names[symbol] for symbol in condition.free_symbols)
        guards.setdefault(text, ShapeGuard(text, {name: by_name[name] for name in used}, where))
    return tuple(guards.values())


def _fake_inputs(env: ShapeEnv, mode: FakeTensorMode, example: Sequence[Any], input_names: Sequence[str],
                 dynamic_axes: Mapping[str, Mapping[int, str]]
                 ) -> tuple[list[Any], dict[str, sympy.Symbol], dict[str, tuple[int, int]]]:
    """Fake tensors of ``example``'s shapes, each axis in ``dynamic_axes`` a symbol hinted
    with its size (one symbol per dim name); also dim name -> symbol and dim name ->
    (input position, axis) the host reads it from."""
    symbols: dict[str, sympy.Symbol] = {}
    bound: dict[str, tuple[int, int]] = {}
    fakes = []
    for position, (name, value) in enumerate(zip(input_names, example)):
        if not isinstance(value, torch.Tensor):
            fakes.append(value)
            continue
        axes = dynamic_axes.get(name, {})
        sizes: list[Any] = []
        for axis, size in enumerate(value.shape):
            if axis not in axes:
                sizes.append(int(size))
                continue
            dim = axes[axis]
            if dim not in symbols:
                symbols[dim] = env.create_symbol(int(size), _DimSource(f"dycl_guard_{len(symbols)}"),
                                                 dynamic_dim=DimDynamic.DYNAMIC, do_not_specialize_zero_one=True)
                bound[dim] = (position, axis)
            sizes.append(env.create_symintnode(symbols[dim], hint=int(size)))
        with mode:
            fakes.append(torch.empty(sizes, dtype=value.dtype))
    return fakes, symbols, bound


#: the torch functions between a Python ``bool()`` of a SymBool and the shape environment
_BOOL_MACHINERY = frozenset({"__bool__", "bool_", "guard_bool", "evaluate", "evaluate_sym_node"})


class _DecisionEnv(ShapeEnv):
    """A shape environment that records each ``bool()`` of a symbolic expression made
    directly by code outside torch: ``(expression, outcome, "file:line")``. A decision
    torch makes for itself (a broadcast or contiguity check inside an op) is not one:
    the traced op makes it again at run time."""

    def __init__(self) -> None:
        super().__init__(specialize_zero_one=False, duck_shape=False)
        self.decisions: list[tuple[Any, bool, str]] = []

    def evaluate_sym_node(self, sym_node: Any, size_oblivious: bool = False, fallback_value: bool | None = None) -> Any:
        result = super().evaluate_sym_node(sym_node, size_oblivious, fallback_value)
        if isinstance(sym_node.expr, sympy.logic.boolalg.Boolean) and sym_node.expr.free_symbols:
            caller = _direct_caller()
            if caller is not None:
                self.decisions.append((sym_node.expr, bool(result), caller))
        return result


def _direct_caller() -> str | None:
    """file:line of the code outside torch whose ``bool()`` of a SymBool this is, or
    None where torch asked: from Python (a torch frame other than the bool machinery)
    or from C++ (an op's kernel calls ``guard_bool`` itself, without ``SymBool.__bool__``)."""
    frame = sys._getframe(2)
    outermost = None
    while frame is not None and frame.f_code.co_filename.startswith(_TORCH_DIR):
        if frame.f_code.co_name not in _BOOL_MACHINERY:
            return None
        outermost = frame.f_code.co_name
        frame = frame.f_back
    if frame is None or outermost != "__bool__":
        return None
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


_RELATIONS = {sympy.Eq: "==", sympy.Ne: "!=", sympy.Lt: "<", sympy.Le: "<=", sympy.Gt: ">", sympy.Ge: ">="}


def python_condition(expr: Any, names: Mapping[sympy.Symbol, str]) -> str | None:
    """``expr`` (a guard over dim symbols) as a Python expression of the operations
    ``ShapeGuard`` evaluates (``+ - * // % **``, comparisons, ``and or not``,
    ``min``/``max``, integers); None for anything else (e.g. true division)."""
    try:
        return _printed(expr, names)
    except _NotPrintable:
        return None


class _NotPrintable(Exception):
    pass


def _printed(expr: Any, names: Mapping[sympy.Symbol, str]) -> str:  # noqa: C901 - one case per operation
    def p(e: Any) -> str:
        return _printed(e, names)

    if expr is sympy.true or expr is sympy.false:
        return str(bool(expr))
    if isinstance(expr, sympy.Symbol):
        if expr not in names:
            raise _NotPrintable(expr)
        return names[expr]
    if isinstance(expr, sympy.Integer):
        return str(int(expr)) if expr >= 0 else f"({int(expr)})"
    for relation, operator in _RELATIONS.items():
        if isinstance(expr, relation):
            return f"({p(expr.lhs)} {operator} {p(expr.rhs)})"
    if isinstance(expr, sympy.And | sympy.Or):
        joiner = " and " if isinstance(expr, sympy.And) else " or "
        return "(" + joiner.join(p(a) for a in expr.args) + ")"
    if isinstance(expr, sympy.Not):
        return f"(not {p(expr.args[0])})"
    if isinstance(expr, sympy.Add):
        return "(" + " + ".join(p(a) for a in expr.args) + ")"
    if isinstance(expr, sympy.Mul):
        return "(" + " * ".join(p(a) for a in expr.args) + ")"
    if isinstance(expr, sympy.Pow) and isinstance(expr.exp, sympy.Integer) and 0 <= int(expr.exp) <= 8:
        return f"({p(expr.base)} ** {int(expr.exp)})"
    if isinstance(expr, FloorDiv):
        return f"({p(expr.args[0])} // {p(expr.args[1])})"
    if isinstance(expr, Mod | PythonMod | sympy.Mod):
        return f"({p(expr.args[0])} % {p(expr.args[1])})"
    if isinstance(expr, Max | Min | sympy.Max | sympy.Min):
        function = "max" if isinstance(expr, Max | sympy.Max) else "min"
        return f"{function}(" + ", ".join(p(a) for a in expr.args) + ")"
    raise _NotPrintable(expr)


__all__ = ["guards_of", "python_condition"]
