"""Symbolic shape propagation through the HCFG (Nimble's ``Any`` dims, SoD²'s
dimension propagation), done with torch's own symbolic shapes.

Terms:

- a *dim symbol* is a sympy symbol named by the user (``batch``, ``h``) for a
  dynamic input dimension, or a fresh one (see below), with the size it has on
  the example;
- the *symbolic mirror* of an exploration state holds, for its variables,
  ``SymbolicTensor`` (dtype and a shape of ints and sympy expressions over dim
  symbols) and ``SymbolicScalar`` (a number derived from shapes, ``x.size(0)``).

Each sub-DNN runs its statements on its inputs' mirrors as fake tensors in a
fresh ``ShapeEnv`` (no real compute), so an output dim is an expression over
the input dims (``((h - 1)//2) + 1``), equal dims are the same expression
wherever they meet, and sizes the shape checks pin to their example value
(``Eq(c, 3)`` for a conv's channels) are *proven static* for the whole model.
Host operations run on the mirror as plain Python.

Where a statement cannot run symbolically (``.item()``, a data-dependent
shape, an op that turns a size into an int and so pins it to the symbol's
hint), the concrete values of the variables it writes are mirrored instead; a
tensor written by a sub-DNN with symbolic inputs then gets fresh dim symbols
for all its dims. That is safe: a symbolic dim only costs the backend some
specialisation, while a wrongly static one would reject valid inputs.

Dims of example size 0 or 1 get a generic hint (3) so that broadcasting checks
do not pin them. Symbolic values are metadata for naming and checking dims;
nothing symbolic is run at call time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import re
from dataclasses import dataclass
from typing import Any

import sympy
import torch
from dycl.hcfg.mirror_structures import children, is_structure, rebuilt, same_kind
from dycl.hcfg.shape_rules import ShapeRules, new_fake
from torch._guards import GuardSource, Source
from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException, FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

_GENERIC_HINT = 3


@dataclass(frozen=True)
class SymbolicTensor:
    """A tensor's symbolic mirror: its dtype and shape (ints and sympy expressions)."""

    shape: tuple[Any, ...]
    dtype: torch.dtype


@dataclass(frozen=True)
class SymbolicScalar:
    """A Python number computed from shapes, as a sympy expression."""

    expr: Any


class SizeDependentStructure(Exception):
    """Statements whose outputs differ in structure between two sizes of their dim symbols
    (``torch.split(x, 2)`` gives ``ceil(batch / 2)`` pieces): a graph traced at one size
    is not the computation at another. ``sizes``: the two assignments of the symbols."""

    def __init__(self, *sizes: dict[sympy.Symbol, int]) -> None:
        super().__init__("different at " + " and ".join(
            ", ".join(f"{symbol}={size}" for symbol, size in assignment.items()) for assignment in sizes))
        self.sizes = sizes


def _structures_differ(first: dict[str, Any], second: dict[str, Any], names) -> bool:
    """Whether two probe runs wrote values of different structure to any of ``names``."""
    return any(_shape_of(first.get(name)) != _shape_of(second.get(name)) for name in names)


def _shape_of(value: Any) -> Any:
    """A value's structure, as two probe runs must agree on it: ranks of tensors and lengths
    of lists and tuples (numbers may differ: they follow the sizes)."""
    if isinstance(value, torch.Tensor):
        return ("tensor", value.dim())
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple(_shape_of(item) for item in value))
    if is_structure(value):
        return (type(value).__name__, tuple((k, _shape_of(v)) for k, v in children(value).items()))
    return "value"


class SymbolicShapes:
    """The dim symbols of one compilation and the symbolic runs over them."""

    def __init__(self) -> None:
        self.examples: dict[sympy.Symbol, int] = {}  # dim symbol -> its size on the example
        self.proven: dict[sympy.Symbol, sympy.Integer] = {}  # dim symbols the shape checks pinned
        self.failures: list[str] = []
        self._fresh = 0
        # (run key, the inputs' mirrors, proven sizes) -> a successful run's results and the sizes it pinned
        self._shared: dict[tuple, tuple[dict[str, Any], dict[sympy.Symbol, sympy.Integer]]] = {}

    # -- dim symbols ------------------------------------------------------------------------------

    def symbol(self, name: str, example: int) -> sympy.Symbol:
        symbol = sympy.Symbol(name, integer=True, positive=True)
        self.examples.setdefault(symbol, example)
        return symbol

    def declare(self, tensor: torch.Tensor, dims: dict[int, str]) -> SymbolicTensor:
        """The mirror of input ``tensor`` whose dims in ``dims`` (axis: name) are symbolic."""
        shape = tuple(self.symbol(dims[axis], size) if axis in dims else size for axis, size in enumerate(tensor.shape))
        return SymbolicTensor(shape, tensor.dtype)

    def lift(self, value: Any, symbolic_dims: bool = False, prefix: str = "dyn") -> Any:
        """The mirror of a concrete value (static shapes, or all fresh symbols if ``symbolic_dims``)."""
        if isinstance(value, torch.Tensor):
            if not symbolic_dims:
                return SymbolicTensor(tuple(value.shape), value.dtype)
            self._fresh += 1
            shape = tuple(self.symbol(f"{_identifier(prefix)}_{self._fresh}_d{axis}", size)
                          for axis, size in enumerate(value.shape))
            return SymbolicTensor(shape, value.dtype)
        if isinstance(value, list | tuple):
            return type(value)(self.lift(v, symbolic_dims, prefix) for v in value)
        if is_structure(value):  # a KV cache, a ModelOutput (hcfg.mirror_structures)
            return rebuilt(value, {k: self.lift(v, symbolic_dims, prefix) for k, v in children(value).items()})
        return value

    def lift_data_numbers(self, value: Any, prefix: str) -> Any:
        """The mirror of a value the host read off tensors (``int(t)``, ``t.item()``, ``t.tolist()``):
        each int a fresh symbol (hinted with the example's number), so a size made from it is
        symbolic downstream and never the example's; anything else as ``lift`` mirrors it."""
        if type(value) is int:
            self._fresh += 1
            return SymbolicScalar(self.symbol(f"{_identifier(prefix)}_{self._fresh}", value))
        if type(value) in (list, tuple):
            return type(value)(self.lift_data_numbers(v, prefix) for v in value)
        return self.lift(value)

    # -- running statements -----------------------------------------------------------------------

    def run_host(self, code: Any, mirror: dict[str, Any]) -> bool:
        """Run a host statement on the mirror; False where it cannot run there."""
        try:
            exec(code, mirror)  # noqa: S102 - the rewritten function's own statement
        except Exception as exc:  # noqa: BLE001 - any failure means: mirror the concrete values
            self._failed(exc)
            return False
        return True

    def run_tensor_code(self, code: Any, mirror: dict[str, Any], reads: set[str], writes: set[str],
                        observed: dict[str, Any] | None = None, shared: tuple | None = None) -> bool:
        """Run sub-DNN statements on fake tensors made from the mirrors of ``reads``;
        store the mirrors of ``writes``. False (mirror untouched) where that fails or
        a dim symbol got pinned to a size other than its example's. ``observed``: the
        values the statements wrote when they ran for real on the example (every dim
        symbol at its example size), where the caller has them. ``shared``: the statements'
        ``hcfg.shared_runs.run_key``; a successful run with the same key on mirrors of the
        same shapes is reused where its results agree with ``observed``."""
        key = _share_key(shared, reads, mirror, self.proven) if observed is not None else None
        known = self._shared.get(key) if key is not None else None
        if known is not None and _agrees(known[0], observed, self.examples):
            self.proven.update(known[1])
            mirror.update(known[0])
            return True
        run = _Run(self)
        try:
            namespace = dict(mirror)
            for name in reads & mirror.keys():
                namespace[name] = run.materialize(mirror[name])
            with run.mode, ShapeRules(), _quiet_fake_tensors():
                exec(code, namespace)  # noqa: S102 - the rewritten function's own statements
            pinned = run.pinned()
            results = {name: run.canonical(namespace[name]) for name in writes if name in namespace}
        except Exception as exc:  # noqa: BLE001
            self._failed(exc)
            return False
        for symbol, size in pinned.items():
            if size != self.examples[symbol] or run.hints[symbol] != size:
                self.failures.append(f"{symbol} pinned to its hint {size}")
                return False
        if not self._holds_where_assumed(run, code, mirror, reads, writes, results, observed):
            self.failures.append("a shape guard fails at some size and the result differs there")
            return False
        proven = {symbol: sympy.Integer(size) for symbol, size in pinned.items()}
        self.proven.update(proven)
        mirror.update(results)
        if key is not None and all(_plain(value) for value in results.values()):
            self._shared[key] = (results, proven)
        return True

    def _holds_where_assumed(self, run: _Run, code: Any, mirror: dict[str, Any], reads: set[str],
                             writes: set[str], results: dict[str, Any], observed: dict[str, Any] | None) -> bool:
        """The symbolic run decided shape checks at its hints (``2*b >= 3``: a slice
        ``[:3]`` keeps 3 rows); where such a guard fails at the example size, at 1 or
        at a larger size, the result is checked against a static run at that size.
        At the example size that run is the real one (``observed``) where there is one:
        nearly every op guards ``Ne(b, 1)`` (strides), so with an example batch of 1
        every sub-DNN would otherwise run a third time."""
        symbols = list(run.hints)
        example = {symbol: self.examples[symbol] for symbol in symbols}
        samples = [example, dict.fromkeys(symbols, 1),
                   {symbol: self.examples[symbol] + offset for symbol, offset in zip(symbols, _PROBE_OFFSETS)}]
        samples = [sample for index, sample in enumerate(samples) if sample not in samples[:index]]
        guards = [guard.expr for guard in run.env.guards]
        if not guards:
            return True
        to_ours = {created: symbol for symbol, created in run._to_env.items()}
        try:
            for sample in samples:
                if all(bool(guard.xreplace(to_ours).xreplace(sample)) for guard in guards):
                    continue
                probed = observed if observed is not None and sample == example else _probe(
                    code, mirror, reads, writes, sample)
                if not _same_shapes(results, probed, sample):
                    return False
        except Exception as exc:  # noqa: BLE001 - a size the statements cannot run at: not verified
            self._failed(exc)
            return False
        return True

    def probe_tensor_code(self, code: Any, mirror: dict[str, Any], reads: set[str], writes: set[str],
                          prefix: str) -> bool:
        """Where the symbolic run failed (an op pinned a dim, or has no symbolic rule):
        run the statements on fake tensors of static shapes twice, every dim symbol at
        its example size and then at that size plus an offset of its own. An output
        dim equal in both runs is static; one equal to the same symbol's size in both
        runs is that symbol; any other gets a fresh symbol. False (mirror untouched)
        where a run fails. Raises ``SizeDependentStructure`` where the two runs give
        different structures (a list or tuple of another length, a tensor of another rank):
        the statements' graph, traced at the example, holds at no other size."""
        symbols = sorted(self._symbols_of([mirror[name] for name in reads & mirror.keys()]), key=str)
        first = {symbol: self.examples[symbol] for symbol in symbols}
        second = {symbol: self.examples[symbol] + offset for symbol, offset in zip(symbols, _PROBE_OFFSETS)}
        if len(symbols) > len(_PROBE_OFFSETS):
            return False
        try:
            runs = [_probe(code, mirror, reads, writes, sizes) for sizes in (first, second)]
        except Exception as exc:  # noqa: BLE001 - data-dependent ops have no fake run either
            self._failed(exc)
            return False

        def merged(a: Any, b: Any) -> Any:  # a and b have one structure (checked below, before merging)
            if isinstance(a, torch.Tensor):
                return SymbolicTensor(tuple(dim(x, y) for x, y in zip(a.shape, b.shape)), a.dtype)
            if isinstance(a, list | tuple):
                items = [merged(x, y) for x, y in zip(a, b)]
                return type(a)(*items) if hasattr(a, "_fields") else type(a)(items)  # a namedtuple takes fields
            if is_structure(a):
                return rebuilt(a, {k: merged(v, children(b)[k]) for k, v in children(a).items()})
            return a  # a number from sizes: the symbolic run's business (dycl.export.size_numbers)

        def dim(x: int, y: int) -> Any:
            if x == y:
                return int(x)
            for symbol in symbols:
                if first[symbol] == x and second[symbol] == y:
                    return symbol
            self._fresh += 1
            return self.symbol(f"{_identifier(prefix)}_{self._fresh}", int(x))

        if _structures_differ(*runs, runs[0]):
            raise SizeDependentStructure(first, second)
        results = {name: merged(runs[0][name], runs[1][name]) for name in runs[0]}
        mirror.update(results)
        return True

    def test_relation(self, code: Any, mirror: dict[str, Any], reads: set[str]) -> sympy.Basic | None:
        """The condition over dim symbols under which the expression ``code`` (an ``if`` test)
        is true; None where it is not a test on sizes, or cannot be evaluated on the mirror
        without pinning a size (``len(x)``, ``bool()`` of a comparison: the shape environment's
        guards say where the outcome holds, not where the other one does)."""
        run = _Run(self)
        try:
            namespace = dict(mirror)
            for name in reads & mirror.keys():
                namespace[name] = run.materialize(mirror[name])
            namespace.setdefault("len", _symbolic_len)  # len(x) of a tensor would pin its first dim
            with run.mode, ShapeRules(), _quiet_fake_tensors():
                value = eval(code, namespace)  # noqa: S307 - the rewritten function's own test
            if not isinstance(value, torch.SymBool) or run.env.guards:
                return None
            relation = run.env.simplify(value.node.expr)
            if relation.free_symbols - run._from_env.keys():
                return None
            return relation.xreplace(run._from_env)
        except Exception:  # noqa: BLE001 - not a test on sizes (it reads values): explored as before
            return None

    def sizes_from_data(self, code: Any, mirror: dict[str, Any], reads: set[str], writes: set[str]) -> bool:
        """Whether the statements compute a size from tensor values (``nonzero``, ``torch.where(mask)``,
        boolean indexing, ``masked_select``, ``unique``): fake tensors cannot give their output shapes."""
        sizes = {symbol: self.examples[symbol] for symbol in self._symbols_of(
            [mirror[name] for name in reads & mirror.keys()])}
        try:
            _probe(code, mirror, reads, writes, sizes)
        except (DynamicOutputShapeException, DataDependentOutputException):
            return True
        except Exception:  # noqa: BLE001 - another failure says nothing about sizes
            return False
        return False

    def specialise(self, symbols) -> dict[sympy.Symbol, int]:
        """Make ``symbols`` static at their example sizes for the whole compilation."""
        sizes = {symbol: self.examples[symbol] for symbol in symbols}
        self.proven.update({symbol: sympy.Integer(size) for symbol, size in sizes.items()})
        return sizes

    def differs_in_structure(self, code: Any, mirror: dict[str, Any], reads: set[str], writes: set[str],
                             structure: SizeDependentStructure) -> bool:
        """Whether ``code`` writes values of different structure at the two sizes of
        ``structure`` (to find the statement that made them differ)."""
        return _structures_differ(*(_probe(code, mirror, reads, writes, sizes) for sizes in structure.sizes), writes)

    def _symbols_of(self, values: list[Any]) -> set[sympy.Symbol]:
        found: set[sympy.Symbol] = set()
        for value in values:
            if isinstance(value, SymbolicTensor):
                for size in value.shape:
                    if isinstance(size, sympy.Basic):
                        found |= size.free_symbols
            elif isinstance(value, SymbolicScalar) and isinstance(value.expr, sympy.Basic):
                found |= value.expr.free_symbols
            elif isinstance(value, list | tuple):
                found |= self._symbols_of(list(value))
        return {symbol for symbol in found if symbol in self.examples}

    def _failed(self, exc: Exception) -> None:
        text = str(exc).splitlines()[0] if str(exc) else ""
        self.failures.append(f"{type(exc).__name__}: {text[:200]}")

    # -- reading dims back -----------------------------------------------------------------------

    def dim(self, size: Any) -> int | str:
        """An int for a static dim, else the dim's expression over the dim symbols."""
        if isinstance(size, int):
            return size
        if not isinstance(size, sympy.Basic):
            raise TypeError(f"not a dim: {size!r} ({type(size).__name__})")
        expr = size.xreplace(self.proven)
        return int(expr) if expr.is_number else str(expr)

    def shape(self, value: Any) -> tuple[int | str, ...] | None:
        """The named dims of a tensor's mirror; None for anything else."""
        if isinstance(value, SymbolicTensor):
            return tuple(self.dim(size) for size in value.shape)
        if isinstance(value, torch.Tensor):  # a value the host made (a stored constant)
            return tuple(value.shape)
        return None

    def has_symbols(self, value: Any) -> bool:
        """Whether a mirror (tensor, number or list of them) depends on a dim symbol."""
        if isinstance(value, SymbolicTensor):
            return any(isinstance(d, str) for d in self.shape(value))
        if isinstance(value, list | tuple):
            return any(self.has_symbols(v) for v in value)
        if is_structure(value):
            return any(self.has_symbols(v) for v in children(value).values())
        return isinstance(value, SymbolicScalar)


class _Run:
    """One symbolic run of a sub-DNN: its own shape environment, so that a size an
    op pins (by calling ``int`` on it) pins it here only."""

    def __init__(self, shapes: SymbolicShapes) -> None:
        self.shapes = shapes
        self.env = ShapeEnv(specialize_zero_one=False, duck_shape=False)
        self.mode = FakeTensorMode(shape_env=self.env, allow_non_fake_inputs=True)
        # each run has its own shape environment, so its cache entries are never hit by another run, and
        # checking one costs about what running the op's shape rule does (measured: 20-30% of the run)
        self.mode.cache_enabled = False
        self.hints: dict[sympy.Symbol, int] = {}
        self._to_env: dict[sympy.Symbol, sympy.Expr] = {}
        self._from_env: dict[sympy.Symbol, sympy.Symbol] = {}

    def size(self, expr: Any) -> Any:
        if isinstance(expr, int):
            return expr
        expr = sympy.sympify(expr).xreplace(self.shapes.proven)
        if expr.is_number:
            return int(expr)
        for symbol in expr.free_symbols:
            if symbol not in self._to_env:
                example = self.shapes.examples[symbol]
                hint = example if example > 1 else _GENERIC_HINT
                created = self.env.create_symbol(hint, _DimSource(f"dycl_{symbol}"), dynamic_dim=DimDynamic.DYNAMIC,
                                                 do_not_specialize_zero_one=True)
                self.hints[symbol] = hint
                self._to_env[symbol] = created
                self._from_env[created] = symbol
        hint = int(expr.xreplace(self.hints))
        return self.env.create_symintnode(expr.xreplace(self._to_env), hint=hint)

    def materialize(self, value: Any) -> Any:
        if isinstance(value, SymbolicTensor):
            return new_fake(self.mode, [self.size(s) for s in value.shape], value.dtype)
        if isinstance(value, SymbolicScalar):
            return self.size(value.expr)
        if isinstance(value, list | tuple):
            return type(value)(self.materialize(v) for v in value)
        if is_structure(value):
            return rebuilt(value, {k: self.materialize(v) for k, v in children(value).items()})
        return value

    def expr(self, size: Any) -> Any:
        if isinstance(size, int):
            return size
        expr = self.env.simplify(size.node.expr)
        if expr.is_number:
            return int(expr)
        unknown = expr.free_symbols - self._from_env.keys()
        if unknown:
            raise ValueError(f"a size with no example value ({sorted(map(str, unknown))})")
        return expr.xreplace(self._from_env)

    def canonical(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return SymbolicTensor(tuple(self.expr(s) for s in value.shape), value.dtype)
        if isinstance(value, torch.SymInt):
            return SymbolicScalar(self.expr(value))
        if isinstance(value, torch.SymBool | torch.SymFloat):
            return SymbolicScalar(self.env.simplify(value.node.expr))
        if isinstance(value, list | tuple):
            return type(value)(self.canonical(v) for v in value)
        if is_structure(value):
            return rebuilt(value, {k: self.canonical(v) for k, v in children(value).items()})
        return value

    def pinned(self) -> dict[sympy.Symbol, int]:
        """Dim symbols this run's shape checks fixed to a number."""
        fixed = {}
        for symbol, created in self._to_env.items():
            value = self.env.simplify(created)
            if value.is_number:
                fixed[symbol] = int(value)
        return fixed


def _symbolic_len(value: Any) -> Any:
    """``len()`` that gives a tensor's first dim as it is (a SymInt), not as an int."""
    return value.shape[0] if isinstance(value, torch.Tensor) and value.dim() > 0 else len(value)


@contextlib.contextmanager
def _quiet_fake_tensors():
    """FakeTensorMode logs a traceback for every op whose shape rule fails; such a failure
    is an expected outcome here (the caller falls back), not the user's problem."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    was_disabled = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = was_disabled


#: how far the second probe moves each dim symbol (distinct primes: a dim that follows
#: one symbol is told apart from one that follows another, or a multiple of it)
_PROBE_OFFSETS = (7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47)


def _share_key(shared: tuple | None, reads: set[str], mirror: dict[str, Any],
               proven: dict[sympy.Symbol, sympy.Integer]) -> tuple | None:
    """What a symbolic run's result depends on (``run_tensor_code``), or None where an input
    is a value not described by its shape (a module, a Python object)."""
    if shared is None:
        return None
    try:
        key = shared, tuple((name, _described(mirror[name]) if name in mirror else None) for name in sorted(reads)), \
            frozenset(proven.items())
        hash(key)  # a mirror may hold a SymInt of an earlier run (not hashable): then not shared
    except TypeError:
        return None
    return key


def _described(value: Any) -> Any:
    if isinstance(value, SymbolicTensor | SymbolicScalar):
        return value
    if isinstance(value, torch.Tensor):  # a value the host made: its data is never read symbolically
        return ("tensor", tuple(value.shape), value.dtype, value.stride())
    if isinstance(value, list | tuple):
        return type(value).__name__, tuple(_described(v) for v in value)
    if value is None or type(value) in (int, float, bool, str):
        return type(value).__name__, value
    raise TypeError(f"not described by shape: {type(value).__name__}")


def _plain(value: Any) -> bool:
    """A mirror that holds only shapes and numbers (safe to hand to another sub-DNN)."""
    if isinstance(value, list | tuple):
        return all(_plain(v) for v in value)
    return value is None or isinstance(value, SymbolicTensor | SymbolicScalar) or type(value) in (int, float, bool, str)


def _agrees(symbolic: dict[str, Any], observed: dict[str, Any], examples: dict[sympy.Symbol, int]) -> bool:
    """Whether symbolic mirrors, at the example sizes, are exactly what was observed there."""
    return symbolic.keys() <= observed.keys() and all(
        _agrees_value(value, observed[name], examples) for name, value in symbolic.items())


def _agrees_value(symbolic: Any, concrete: Any, examples: dict[sympy.Symbol, int]) -> bool:
    if isinstance(symbolic, SymbolicTensor):
        if not isinstance(concrete, torch.Tensor) or concrete.dtype != symbolic.dtype or (
                concrete.dim() != len(symbolic.shape)):
            return False
        sizes = [size if type(size) is int else sympy.sympify(size).xreplace(examples) for size in symbolic.shape]
        return all((type(size) is int or size.is_Integer) and int(size) == got
                   for size, got in zip(sizes, concrete.shape))
    if isinstance(symbolic, SymbolicScalar):
        number = sympy.sympify(symbolic.expr).xreplace(examples)
        return number.is_number and type(concrete) in (int, float, bool) and number == concrete
    if isinstance(symbolic, list | tuple):
        return (type(concrete) is type(symbolic) and len(concrete) == len(symbolic)
                and all(_agrees_value(a, b, examples) for a, b in zip(symbolic, concrete)))
    if is_structure(symbolic):
        return same_kind(symbolic, concrete) and all(
            _agrees_value(v, children(concrete)[k], examples) for k, v in children(symbolic).items())
    return type(symbolic) is type(concrete) and symbolic == concrete


def _same_shapes(symbolic: Any, probed: Any, sizes: dict[sympy.Symbol, int]) -> bool:
    """Whether the symbolic mirrors, at ``sizes``, have the probed values' shapes."""
    if isinstance(symbolic, dict):
        return symbolic.keys() == probed.keys() and all(_same_shapes(symbolic[k], probed[k], sizes) for k in symbolic)
    if isinstance(symbolic, SymbolicTensor):
        if not isinstance(probed, torch.Tensor) or probed.dim() != len(symbolic.shape):
            return False
        return all(int(sympy.sympify(size).xreplace(sizes)) == got for size, got in zip(symbolic.shape, probed.shape))
    if isinstance(symbolic, list | tuple):
        return (isinstance(probed, list | tuple) and len(symbolic) == len(probed)
                and all(_same_shapes(a, b, sizes) for a, b in zip(symbolic, probed)))
    if is_structure(symbolic):
        return same_kind(symbolic, probed) and all(
            _same_shapes(v, children(probed)[k], sizes) for k, v in children(symbolic).items())
    return True


def _probe(code: Any, mirror: dict[str, Any], reads: set[str], writes: set[str],
           sizes: dict[sympy.Symbol, int]) -> dict[str, Any]:
    """Run ``code`` on fake tensors whose dim symbols take ``sizes``; the values it wrote."""
    mode = FakeTensorMode(allow_non_fake_inputs=True)

    def concrete(value: Any) -> Any:
        if isinstance(value, SymbolicTensor):
            shape = [int(sympy.sympify(size).xreplace(sizes)) for size in value.shape]
            with mode:
                return torch.empty(shape, dtype=value.dtype)
        if isinstance(value, SymbolicScalar):
            # sympify again: a bare symbol replaced by a Python int comes back as that int
            number = sympy.sympify(sympy.sympify(value.expr).xreplace(sizes))
            if not number.is_number:
                raise ValueError(f"a scalar with unknown symbols: {value.expr}")
            return int(number) if number.is_integer else float(number)
        if isinstance(value, list | tuple):
            return type(value)(concrete(v) for v in value)
        if is_structure(value):
            return rebuilt(value, {k: concrete(v) for k, v in children(value).items()})
        return value

    namespace = dict(mirror)
    for name in reads & mirror.keys():
        namespace[name] = concrete(mirror[name])
    with mode, ShapeRules(), _quiet_fake_tensors():
        exec(code, namespace)  # noqa: S102 - the rewritten function's own statements
    return {name: namespace[name] for name in writes if name in namespace}


@dataclasses.dataclass(frozen=True)
class _DimSource(Source):
    """Where a dim symbol comes from, for the shape environment's messages
    (``torch._dynamo``'s ConstantSource, without importing dynamo)."""

    dim_name: str

    @property
    def _name_template(self) -> str:
        return self.dim_name

    @functools.cached_property
    def guard_source(self) -> GuardSource:
        return GuardSource.CONSTANT


def _identifier(name: str) -> str:
    return re.sub(r"\W", "_", name)


__all__ = ["SymbolicScalar", "SymbolicShapes", "SymbolicTensor"]
