"""Python numbers computed from sizes, kept exact in an exported sub-DNN.

In eager code ``x.shape[0]`` is an ``int``; while the TorchScript exporter traces
a sub-DNN it is a 0-d ``int64`` tensor, so that ``x[:x.shape[0] // 2]`` is
recorded with the real size. Python's ``round``, ``min``/``max``,
``math.floor``/``ceil``/``trunc``, ``int`` and ``torch.sym_min``/``sym_max``
cannot take such a tensor (``round`` raises, ``min`` freezes the comparison at the
example, ``int`` the whole value). ``size_calls`` rewrites those calls in a
sub-DNN's statements, where an argument reads a size (``.shape``, ``.size()``,
``len()``, ``.dim()``, ``.numel()``) or a Python number the sub-DNN receives or
computed from one, into methods of ``SizeNumbers``:

- on Python numbers (eager runs) they call the builtin: nothing changes;
- on integer tensors (the trace) they compute the same integer with integer
  tensor ops: ``round(a / b)`` rounds half to even as Python does, ``floor(a / b)``
  is ``a // b``, ``min``/``max`` are ``torch.minimum``/``maximum``. So the number is
  computed per call, symbolic where the size is;
- on a float tensor they raise ``UnsupportedError`` at the statement: float
  arithmetic in the exported graph runs in float32, and rounding its result
  could differ from Python's float64 (``ceil(10 * 0.7)``).

A tensor built from a list repeated a size number of times
(``torch.LongTensor([[start]] * batch_size)``, the DyCL authors' captioner; also
``torch.tensor``/``as_tensor`` and the other legacy constructors, the count on either
side of ``*``) goes to ``SizeNumbers.repeat_list``: on a Python count it builds the
same tensor; on an integer tensor (the trace) it builds the tensor of the list once
and repeats it along dim 0 (``Tensor.repeat``, recorded with the traced count), which
holds the same values in the same order for every count >= 1, the list's items
being copied alike. A count of 0 (``[[s]] * 0 == []``) would give ``[]``'s shape
in eager and ``(0, 1)`` in the graph: the count is a size, and sizes are at least 1
where the host checks them (``dycl.export.shape_guards``, ``hostgen.manifest``); a
count read from data is refused before (``hcfg.decisions``).

Assumes: sizes are below 2**31 (so ``a / b`` in float64 rounds like the exact
quotient).
"""

from __future__ import annotations

import builtins
import functools
import math
import types
from typing import Any

import libcst as cst
import torch

from dycl.rewriter.errors import SourceLocation, UnsupportedError
from dycl.rewriter.walk import descendants, map_children

#: a value this module's methods read is read at the sub-DNN's statement that calls them (``hcfg.decisions``)
DYCL_DECISIONS_SEEN_AT_CALLER = True

_SIZE_ATTRIBUTES = frozenset({"shape", "ndim"})
_SIZE_METHODS = frozenset({"size", "dim", "numel", "nelement", "ndimension"})


@functools.lru_cache(maxsize=1)
def _functions() -> dict[int, str]:
    """id of a Python function -> the ``SizeNumbers`` method that replaces it."""
    return {id(builtins.round): "round", id(math.floor): "floor", id(math.ceil): "ceil", id(math.trunc): "trunc",
            id(builtins.int): "int", id(builtins.min): "min", id(builtins.max): "max", id(torch.sym_min): "min",
            id(torch.sym_max): "max"}


class SizeNumbers:
    """The replacements of one statement (``where`` is its source line, for errors)."""

    def __init__(self, where: SourceLocation | None) -> None:
        self.where = where

    def _refuse(self, what: str) -> UnsupportedError:
        return UnsupportedError(
            f"{what} of a float (computed from sizes, or a number the host passes) in code exported as one "
            "graph (float32 there, float64 in Python: the result could differ)", self.where,
            "compute the size with integers (a // b, -(-a // b), round(a / b) with integer a and b)")

    def _integer(self, value: Any, what: str) -> Any:
        if isinstance(value, torch.Tensor):
            if value.dim() != 0 or value.is_floating_point() or value.is_complex():
                raise self._refuse(what)
            return value.to(torch.int64)
        if isinstance(value, float):
            if not value.is_integer():
                raise self._refuse(what)
            return int(value)
        return int(value)

    def _unary(self, value: Any, builtin: Any, what: str) -> Any:
        if not isinstance(value, torch.Tensor):
            return builtin(value)
        return self._integer(value, what)

    def round(self, value: Any) -> Any:
        return self._unary(value, builtins.round, "round()")

    def round_digits(self, value: Any, digits: Any) -> Any:
        """``round(value, digits)``: an integer rounded to digits >= 0 is itself; a float or a negative
        count of digits in the graph is refused (float32 there, and ``round(1234, -2)`` rounds half to even)."""
        if not isinstance(value, torch.Tensor) and not isinstance(digits, torch.Tensor):
            return builtins.round(value, digits)
        if isinstance(digits, builtins.int) and digits >= 0:
            return self._integer(value, "round(x, ndigits)")
        raise self._refuse("round(x, ndigits)")

    def floor(self, value: Any) -> Any:
        return self._unary(value, math.floor, "math.floor()")

    def ceil(self, value: Any) -> Any:
        return self._unary(value, math.ceil, "math.ceil()")

    def trunc(self, value: Any) -> Any:
        return self._unary(value, math.trunc, "math.trunc()")

    def int(self, value: Any) -> Any:
        return self._unary(value, builtins.int, "int()")

    def _quotient(self, a: Any, b: Any, what: str) -> tuple[torch.Tensor, torch.Tensor] | None:
        if not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor):
            return None
        a, b = self._integer(a, what), self._integer(b, what)
        a = a if isinstance(a, torch.Tensor) else torch.tensor(a, dtype=torch.int64)
        return a, b

    def round_div(self, a: Any, b: Any) -> Any:
        operands = self._quotient(a, b, "round()")
        if operands is None:
            return builtins.round(a / b)
        a, b = operands
        quotient = torch.div(a, b, rounding_mode="floor")
        twice = 2 * (a - quotient * b) * (torch.sign(b) if isinstance(b, torch.Tensor) else (1 if b > 0 else -1))
        size = b.abs() if isinstance(b, torch.Tensor) else builtins.abs(b)
        up = (twice > size) | ((twice == size) & (torch.remainder(quotient, 2) == 1))  # half to even, as Python
        return quotient + up.to(torch.int64)

    def floor_div(self, a: Any, b: Any) -> Any:
        operands = self._quotient(a, b, "math.floor()")
        return math.floor(a / b) if operands is None else torch.div(*operands, rounding_mode="floor")

    def ceil_div(self, a: Any, b: Any) -> Any:
        operands = self._quotient(a, b, "math.ceil()")
        return math.ceil(a / b) if operands is None else -torch.div(-operands[0], operands[1], rounding_mode="floor")

    def trunc_div(self, a: Any, b: Any) -> Any:
        operands = self._quotient(a, b, "int()")
        return math.trunc(a / b) if operands is None else torch.div(*operands, rounding_mode="trunc")

    int_div = trunc_div

    def _extremum(self, values: tuple[Any, ...], builtin: Any, combine: Any, what: str) -> Any:
        if not any(isinstance(v, torch.Tensor) for v in values):
            return builtin(*values)
        tensors = [v if isinstance(v, torch.Tensor) else torch.tensor(v, dtype=torch.int64)
                   for v in (self._integer(v, what) for v in values)]
        return functools.reduce(combine, tensors)

    def repeat_list(self, constructor: Any, items: list | tuple, count: Any, **options: Any) -> Any:
        """``constructor(items * count, **options)``, with a traced ``count`` kept (module note)."""
        if not isinstance(count, (torch.Tensor, torch.SymInt)):  # eager: as written
            return constructor(items * count, **options)
        if isinstance(count, torch.Tensor):  # the trace (a SymInt: a run on fake tensors with symbolic sizes)
            count = self._integer(count, "a list repeated")
        base = constructor(items, **options)
        if base.dim() == 0:  # items was not a list of numbers: let the constructor say so as eager would
            return constructor(items * int(count), **options)
        # Note: a count of 0 gives eager a tensor of shape (0,), the graph one of (0, ...) where the items are
        # lists; this bool() is a decision on the count the export must keep (a guard on sizes, or a refusal)
        if base.dim() > 1 and not bool(count > 0):
            return constructor([], **options)
        return base.repeat(count, *[1] * (base.dim() - 1))

    def min(self, *values: Any) -> Any:
        return self._extremum(values, builtins.min, torch.minimum, "min()")

    def max(self, *values: Any) -> Any:
        return self._extremum(values, builtins.max, torch.maximum, "max()")


def _static(node: cst.BaseExpression, namespace: dict[str, Any], local: set[str]) -> Any:
    if isinstance(node, cst.Name):
        if node.value in local:
            return None
        return namespace[node.value] if node.value in namespace else getattr(builtins, node.value, None)
    if isinstance(node, cst.Attribute):
        base = _static(node.value, namespace, local)
        if isinstance(base, types.ModuleType):
            return getattr(base, node.attr.value, None)
    return None


def reads_size(node: cst.CSTNode) -> bool:
    """Whether ``node`` reads a size (``.shape``, ``.ndim``, ``.size()``, ``.dim()``, ``.numel()``, ``len()``)."""
    return _reads_size(node, set())


def _reads_size(node: cst.CSTNode, numbers: set[str]) -> bool:
    for current in descendants(node):
        if isinstance(current, cst.Attribute) and current.attr.value in _SIZE_ATTRIBUTES:
            return True
        if isinstance(current, cst.Call):
            func = current.func
            if isinstance(func, cst.Attribute) and func.attr.value in _SIZE_METHODS:
                return True
            if isinstance(func, cst.Name) and func.value == "len":
                return True
        if isinstance(current, cst.Name) and current.value in numbers:
            return True
    return False


_CONSTRUCTORS = frozenset({"tensor", "as_tensor", "LongTensor", "IntTensor", "FloatTensor", "DoubleTensor",
                           "BoolTensor", "ByteTensor", "HalfTensor", "Tensor"})


def _repeated_list(call: cst.Call, namespace: dict[str, Any], local: set[str], numbers: set[str],
                   helper: str) -> cst.Call | None:
    """``helper.repeat_list(<constructor>, <list>, <count>, **keywords)`` for
    ``<constructor>(<list> * <count>, **keywords)`` with a count read from sizes (module note)."""
    if not call.args or call.args[0].keyword is not None or call.args[0].star:
        return None
    if any(a.keyword is None or a.star for a in call.args[1:]):
        return None
    constructor = _static(call.func, namespace, local)
    if getattr(constructor, "__name__", None) not in _CONSTRUCTORS or getattr(torch, constructor.__name__,
                                                                             None) is not constructor:
        return None
    value = call.args[0].value
    if not isinstance(value, cst.BinaryOperation) or not isinstance(value.operator, cst.Multiply):
        return None
    for items, count in ((value.left, value.right), (value.right, value.left)):
        if isinstance(items, (cst.List, cst.Tuple)) and _reads_size(count, numbers):
            function = cst.Attribute(cst.Name(helper), cst.Name("repeat_list"))
            return cst.Call(function, [cst.Arg(call.func), cst.Arg(items), cst.Arg(count), *call.args[1:]])
    return None


def size_calls(statement: cst.SimpleStatementLine, namespace: dict[str, Any], local: set[str],
               numbers: set[str], helper: str) -> cst.SimpleStatementLine:
    """``statement`` with its size-number calls going to the ``SizeNumbers`` named
    ``helper`` (see the module note). ``local`` are the sub-DNN's variables (never
    builtins); ``numbers`` are those holding Python numbers: it grows with the
    targets of a statement that computes one from sizes."""
    functions = _functions()

    def visit(current: cst.CSTNode) -> cst.CSTNode:
        current = map_children(current, visit)
        if isinstance(current, cst.Call):
            repeated = _repeated_list(current, namespace, local, numbers, helper)
            if repeated is not None:
                return repeated
        if not isinstance(current, cst.Call) or any(a.keyword is not None or a.star for a in current.args):
            return current
        method = functions.get(id(_static(current.func, namespace, local)))
        if method is None or not _reads_size(current, numbers):
            return current
        values = [a.value for a in current.args]
        if method in ("min", "max"):
            if len(values) < 2:
                return current
        elif method == "round" and len(values) == 2:
            method = "round_digits"
        elif len(values) != 1:
            return current
        elif isinstance(values[0], cst.BinaryOperation) and isinstance(values[0].operator, cst.Divide):
            method = f"{'trunc' if method == 'int' else method}_div"
            values = [values[0].left, values[0].right]
        function = cst.Attribute(cst.Name(helper), cst.Name(method))
        return cst.Call(function, [cst.Arg(v) for v in values])

    new = visit(statement)
    small = statement.body[0]
    if isinstance(small, cst.Assign) and _reads_size(small.value, numbers):
        numbers.update(n.value for t in small.targets for n in descendants(t.target) if isinstance(n, cst.Name))
    return new


def has_size_calls(node: cst.CSTNode, namespace: dict[str, Any]) -> bool:
    """Whether ``node`` calls one of the replaced functions on a size (syntactically)."""
    functions = _functions()
    return any(isinstance(n, cst.Call) and id(_static(n.func, namespace, set())) in functions
               and _reads_size(n, set()) for n in descendants(node))


def exact_size_statements(statements: tuple[cst.SimpleStatementLine, ...], namespace: dict[str, Any],
                          local: set[str], numbers: set[str], locate: Any) -> list[cst.SimpleStatementLine]:
    """A sub-DNN's ``statements`` with ``size_calls`` applied; each statement that needs
    one gets its ``SizeNumbers`` (``locate(statement)`` is its source line) in ``namespace``."""
    numbers = set(numbers)
    out = []
    for index, statement in enumerate(statements):
        helper = f"_dycl_sizes_{index}"
        while helper in namespace or helper in local:
            helper += "_"
        new = size_calls(statement, namespace, local, numbers, helper)
        if new is not statement and not new.deep_equals(statement):
            namespace[helper] = SizeNumbers(locate(statement))
        out.append(new)
    return out


__all__ = ["SizeNumbers", "exact_size_statements", "has_size_calls", "size_calls"]
