"""What the single-graph lowering knows about each host variable, and how two branches' knowledge joins.

A host variable holds, at a point of the walk (``dycl.backends.single_graph``):

- ``Tensor``: an ONNX value of the graph being built (a sub-DNN output, a model input);
- ``Number``: a Python number held as a one-element ONNX value (``t.item()``, a scalar output of
  a sub-DNN, a counter whose value differs between paths); ``kind`` is its Python type, ``counter``
  whether only the walk's own small numbers made it;
- ``Static``: a Python value the walk knows (``n = 1``, ``None``): no ONNX value at all;
- ``ListValue``: a list the host builds (``feats = []``, ``feats.append(h)``), by identity, so
  that two names of one list stay one list;
- ``TupleValue``: a tuple the host builds (``pair = (a, b)``);
- ``Conflict``: a value the graph cannot hold (branches that disagree on a list's length, a
  tensor against a number): reading it refuses the lowering, naming why.

Assumes the walk copies the environment for each branch (``copy_env``) and joins the two
copies with ``join``. Guarantees: a joined value is the value of the branch taken, as an ``If``
output, or a ``Conflict``; nothing is guessed."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from onnx import TensorProto


class NotLowerable(Exception):
    """The model keeps its host: the message names what the lowering cannot take."""


@dataclass(frozen=True)
class Tensor:
    name: str
    elem: int


@dataclass(frozen=True)
class Number:
    name: str
    elem: int
    kind: str  # "int", "float" or "bool"
    #: made only from the walk's own small numbers (a counter joined at an ``if``): int64 arithmetic
    #: on it is Python's (a number read from a tensor could overflow where Python's would not)
    counter: bool = False


@dataclass(frozen=True)
class Static:
    value: Any


@dataclass(frozen=True)
class Conflict:
    reason: str


class ListValue:
    """A host list, mutable and shared by identity (``b = a`` makes one list of two names)."""

    def __init__(self, items: list[Any] | None = None) -> None:
        self.items = list(items or [])


@dataclass(frozen=True)
class TupleValue:
    """A tuple the host builds (``pair = (a, b)``): its items' values."""

    items: tuple[Any, ...]


Value = Tensor | Number | Static | Conflict | ListValue | TupleValue
#: the host sequences a sub-DNN takes as a list of tensors
SEQUENCES = (ListValue, TupleValue)

#: the one-element ONNX form of a Python number of each kind
NUMBER_ELEM = {"int": TensorProto.INT64, "float": TensorProto.DOUBLE, "bool": TensorProto.BOOL}
NUMBER_DTYPE = {"int": np.int64, "float": np.float64, "bool": np.bool_}


def python_kind(value: Any) -> str | None:
    """"int", "float" or "bool" for a Python number (bool first: it is an int too), else None."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int) and -2 ** 63 <= value < 2 ** 63:
        return "int"
    if isinstance(value, float):
        return "float"
    return None


def copy_env(env: dict[str, Value]) -> dict[str, Value]:
    """A copy of ``env`` for one branch: its lists copied, aliases kept aliases."""
    return copy.deepcopy(env, {})


#: (then value, else value) -> the joined value's ONNX pair, or None where the branches agree
Pair = tuple[str, str, int]


@dataclass
class Join:
    """The values two branches left, joined: ``pairs`` are the ``If`` outputs to make (then value,
    else value, element type); ``finish(outputs)`` gives the environment after the ``If``."""

    env_then: dict[str, Value]
    env_else: dict[str, Value]
    constant: Callable[[Any, int], tuple[str, str]]  # number, elem -> its value in (then, else) scopes

    def __post_init__(self) -> None:
        self.pairs: list[Pair] = []
        self._lists: dict[tuple[int, int], ListValue] = {}
        self._joined: dict[str, Any] = {}
        for name in sorted(set(self.env_then) | set(self.env_else)):
            if name not in self.env_then or name not in self.env_else:
                self._joined[name] = Conflict(f"'{name}' is assigned on one side of an if only")
            else:
                self._joined[name] = self._value(self.env_then[name], self.env_else[name])

    def conflicted(self) -> set[str]:
        """The names whose joined value is, or holds, a ``Conflict``."""
        return {name for name, value in self._joined.items() if _holds_conflict(value)}

    def _value(self, a: Value, b: Value) -> Any:
        if a is b or (isinstance(a, (Tensor, Number)) and a == b):
            return a
        if isinstance(a, Static) and isinstance(b, Static) and type(a.value) is type(b.value) and a.value == b.value:
            return a
        if isinstance(a, ListValue) and isinstance(b, ListValue):
            return self._list(a, b)
        if isinstance(a, TupleValue) and isinstance(b, TupleValue) and len(a.items) == len(b.items):
            return TupleValue(tuple(self._value(x, y) for x, y in zip(a.items, b.items)))
        if isinstance(a, Tensor) and isinstance(b, Tensor) and a.elem == b.elem:
            return self._pair(a.name, b.name, a.elem, lambda out: Tensor(out, a.elem))
        kinds = {_number_kind(a), _number_kind(b)}
        if len(kinds) == 1 and None not in kinds:
            kind = kinds.pop()
            elem = NUMBER_ELEM[kind]
            names = [self._number_name(v, elem, side) for side, v in enumerate((a, b))]
            counter = all(v.counter if isinstance(v, Number) else abs(v.value) < 2 ** 31 for v in (a, b))
            if None not in names:
                return self._pair(names[0], names[1], elem, lambda out: Number(out, elem, kind, counter))
        return Conflict(f"the two sides of an if leave it as {_describe(a)} and {_describe(b)}")

    def _number_name(self, value: Value, elem: int, side: int) -> str | None:
        if isinstance(value, Number):
            return value.name if value.elem == elem else None
        return self.constant(value.value, elem)[side]

    def _list(self, a: ListValue, b: ListValue) -> Any:
        key = (id(a), id(b))
        if key not in self._lists:
            if len(a.items) != len(b.items):
                return Conflict(f"the two sides of an if leave a list of {len(a.items)} and of {len(b.items)} items")
            self._lists[key] = ListValue()
            self._lists[key].items = [self._value(x, y) for x, y in zip(a.items, b.items)]
        return self._lists[key]

    def _pair(self, then: str, orelse: str, elem: int, make: Callable[[str], Value]) -> Any:
        self.pairs.append((then, orelse, elem))
        return _Pending(len(self.pairs) - 1, make)

    def finish(self, outputs: list[str]) -> dict[str, Value]:
        """The environment after the ``If`` whose outputs (in ``pairs`` order) are ``outputs``."""
        done: dict[int, ListValue] = {}

        def resolve(value: Any) -> Any:
            if isinstance(value, _Pending):
                return value.make(outputs[value.index])
            if isinstance(value, ListValue):
                if id(value) not in done:
                    done[id(value)] = ListValue()
                    done[id(value)].items = [resolve(item) for item in value.items]
                return done[id(value)]
            if isinstance(value, TupleValue):
                return TupleValue(tuple(resolve(item) for item in value.items))
            return value

        return {name: resolve(value) for name, value in self._joined.items()}


@dataclass(frozen=True)
class _Pending:
    index: int
    make: Callable[[str], Value]


def _holds_conflict(value: Any, seen: set[int] | None = None) -> bool:
    if isinstance(value, Conflict):
        return True
    seen = set() if seen is None else seen
    if isinstance(value, (ListValue, TupleValue)) and id(value) not in seen:
        seen.add(id(value))
        return any(_holds_conflict(item, seen) for item in value.items)
    return False


def _number_kind(value: Value) -> str | None:
    if isinstance(value, Number):
        return value.kind
    if isinstance(value, Static):
        return python_kind(value.value)
    return None


def _describe(value: Value) -> str:
    if isinstance(value, Static):
        return f"the value {value.value!r}"
    return {Tensor: "a tensor", Number: "a number", ListValue: "a list", TupleValue: "a tuple"}.get(
        type(value), "a value it cannot hold")


__all__ = ["NUMBER_DTYPE", "NUMBER_ELEM", "SEQUENCES", "Conflict", "Join", "ListValue", "NotLowerable", "Number",
           "Static", "Tensor", "TupleValue", "Value", "copy_env", "python_kind"]
