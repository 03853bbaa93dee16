"""Static values: what the rewriter knows at compile time, and how to write it.

A value is *static* when it does not depend on the model inputs: Python
literals, the model and its submodules, parameters and buffers (as references,
never as computed tensors), configuration attributes, and global modules and
functions such as ``torch`` or ``F.relu``. Each static value carries a *term*:
a closed libcst expression that denotes it in the rewritten function (a
literal, or a path from ``self`` or from a global name).
"""

from __future__ import annotations

import gc
import math
import types
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import libcst as cst
import torch

_LITERAL_SCALARS = (bool, int, float, str, bytes, type(None))


@dataclass(frozen=True)
class Static:
    """A compile-time value and the closed expression that denotes it."""

    value: Any
    term: cst.BaseExpression

    @property
    def substitutable(self) -> bool:
        """Whether uses of a name bound to this value may be replaced by its term.

        A value that is or reaches a container (a list, a dict, a tuple of
        lists) is not: the name stays a variable, so that changes made
        through it or through an alias are seen by every later read.
        """
        return not holds_container(self.value)


@dataclass(frozen=True)
class ListLength:
    """A dynamic list whose length is known: ``outputs`` after two appends.

    ``token`` identifies the list: facts of names that alias it share the token.
    """

    length: int
    token: object = field(default_factory=object)


@dataclass(frozen=True)
class DictKeys:
    """A dynamic dict whose key set is known: ``kwargs = {"mask": m}`` with ``m`` a tensor
    (the keys a call site passed), until a change whose keys cannot be proved; the values
    that are static (``{"use_cache": None, ...}``) are known too.

    ``keys`` are in insertion order; ``token`` identifies the dict (aliases share it).
    """

    keys: tuple
    token: object = field(default_factory=object)
    known: tuple = ()  # (key, Static) for the keys whose value is a static value holding no container

    def value_of(self, key: Any) -> Static | None:
        """The static value at ``key`` where known."""
        return next((static for k, static in self.known if k == key), None)

    def changed(self, keys: tuple | None, known: dict[Any, Static | None] | None = None) -> DictKeys | None:
        """This dict (same token) with ``keys``; ``known`` sets (a Static) or forgets (None)
        the values at some keys; None where the keys are not known."""
        if keys is None:
            return None
        values = {k: static for k, static in self.known if k in keys}
        for key, static in (known or {}).items():
            values.pop(key, None)
            if static is not None and key in keys:
                values[key] = static
        return DictKeys(keys, self.token, tuple(values.items()))


#: facts that track a dynamic container by its token
TOKENED = (ListLength, DictKeys)


# -- containers ------------------------------------------------------------------------------------

CONTAINERS = (list, dict, set, bytearray)


def _is_builtin_view(value: Any) -> bool:
    kind = type(value)
    return kind.__module__ == "builtins" and kind.__name__.endswith(
        ("iterator", "_keys", "_values", "_items"))


def _parts(value: Any) -> Iterable[Any]:
    """The objects ``value`` holds that may be or hold containers."""
    if isinstance(value, (list, tuple, set, frozenset)):
        return value
    if isinstance(value, dict):
        return value.values()
    if isinstance(value, (types.BuiltinMethodType, types.MethodType)):
        owner = getattr(value, "__self__", None)
        return () if owner is None or isinstance(owner, (types.ModuleType, torch.nn.Module)) else (owner,)
    if isinstance(value, (enumerate, zip, reversed)) or _is_builtin_view(value):
        return gc.get_referents(value)
    return ()


def reachable(value: Any, include_self: bool = True) -> dict[int, Any]:
    """Every container ``value`` is or reaches (through tuples, containers,
    views, iterators and bound methods), by id; ``value`` itself only if ``include_self``."""
    found: dict[int, Any] = {}
    seen: set[int] = set()
    stack = [value] if include_self else list(_parts(value))
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, CONTAINERS):
            found[id(current)] = current
        stack.extend(_parts(current))
    return found


_NO_CONTAINERS = (int, float, bool, str, bytes, type(None), torch.Tensor, torch.nn.Module, types.ModuleType,
                  types.FunctionType, type)


def holds_container(value: Any) -> bool:
    """Whether ``value`` is or reaches a container."""
    if type(value) in (list, dict, set, bytearray):
        return True
    if isinstance(value, _NO_CONTAINERS):
        return False
    return bool(reachable(value))


class FreshContainers:
    """The containers the static evaluator created during one rewrite; every
    other container (the model's, a global, a default argument) outlives the
    call. Kept alive here, so that an id is never reused by another object."""

    def __init__(self) -> None:
        self._objects: dict[int, Any] = {}

    def add(self, value: Any) -> Any:
        if isinstance(value, CONTAINERS):
            self._objects[id(value)] = value
        return value

    def __contains__(self, value: Any) -> bool:
        return self._objects.get(id(value)) is value


def is_literal(value: Any) -> bool:
    """Whether ``value`` can be written as a Python literal (a ``str``/``int`` enum member cannot:
    its repr is not one, and the literal would lose its type)."""
    if isinstance(value, _LITERAL_SCALARS):
        return type(value) in _LITERAL_SCALARS
    if isinstance(value, (tuple, list)):
        return all(is_literal(v) for v in value)
    if isinstance(value, dict):
        return all(is_literal(k) and is_literal(v) for k, v in value.items())
    return False


def literal_term(value: Any) -> cst.BaseExpression:
    """The literal expression for ``value`` (``is_literal(value)`` must hold)."""
    if isinstance(value, float) and not math.isfinite(value):
        text = "float('nan')" if math.isnan(value) else ("float('inf')" if value > 0 else "-float('inf')")
        return cst.parse_expression(text)
    if isinstance(value, bool) or value is None:
        return cst.Name(repr(value))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0:
            return cst.UnaryOperation(cst.Minus(), literal_term(-value))
        return cst.Integer(repr(value)) if isinstance(value, int) else cst.Float(repr(value))
    if isinstance(value, (str, bytes)):
        return cst.SimpleString(repr(value))
    if isinstance(value, tuple):
        elements = [cst.Element(literal_term(v)) for v in value]
        if len(elements) == 1:
            elements = [elements[0].with_changes(comma=cst.Comma())]
        return cst.Tuple(elements)
    if isinstance(value, list):
        return cst.List([cst.Element(literal_term(v)) for v in value])
    if isinstance(value, dict):
        return cst.Dict([cst.DictElement(literal_term(k), literal_term(v)) for k, v in value.items()])
    raise TypeError(f"not a literal: {value!r}")


def attribute_term(base: cst.BaseExpression, name: str) -> cst.BaseExpression:
    if name.isidentifier():
        return cst.Attribute(base, cst.Name(name))
    return cst.Call(cst.Name("getattr"), [cst.Arg(base), cst.Arg(literal_term(name))])


def subscript_term(base: cst.BaseExpression, key: Any) -> cst.BaseExpression:
    return cst.Subscript(base, [cst.SubscriptElement(cst.Index(literal_term(key)))])


class ModuleIndex:
    """Canonical paths from the root model to its submodules, parameters and buffers.

    A child of a ModuleList or Sequential is written ``self.blocks[3]``, a child
    of a ModuleDict ``self.layers['name']``, any other child ``self.conv``.
    """

    def __init__(self, root: torch.nn.Module, root_term: cst.BaseExpression,
                 outer: ModuleIndex | None = None) -> None:
        self._terms: dict[int, cst.BaseExpression] = {}
        self.outer = outer
        self._index(root, root_term)

    def _index(self, module: torch.nn.Module, term: cst.BaseExpression) -> None:
        if id(module) in self._terms:
            return
        self._terms[id(module)] = term
        for name, tensor in list(module._parameters.items()) + list(module._buffers.items()):
            if tensor is not None and id(tensor) not in self._terms:
                self._terms[id(tensor)] = attribute_term(term, name)
        for name, child in module._modules.items():
            if child is None:
                continue
            if isinstance(module, (torch.nn.ModuleList, torch.nn.Sequential)) and name.isdigit():
                child_term = subscript_term(term, int(name))
            elif isinstance(module, torch.nn.ModuleDict):
                child_term = subscript_term(term, name)
            else:
                child_term = attribute_term(term, name)
            self._index(child, child_term)

    def term_for(self, value: Any) -> cst.BaseExpression | None:
        term = self._terms.get(id(value))
        if term is None and self.outer is not None:
            return self.outer.term_for(value)
        return term


_MODULE_INTERNALS = frozenset(vars(torch.nn.Module())) - {"training"}


def fingerprint(module: torch.nn.Module, memo: dict[int, tuple]) -> tuple:
    """Everything about ``module`` (and its submodules) that rewriting can depend
    on: classes, configuration attributes, which parameters exist and their
    shapes — but not parameter values, which are never folded."""
    key = id(module)
    if key in memo:
        return memo[key]
    attributes = []
    for name, value in sorted(vars(module).items()):
        if name in _MODULE_INTERNALS:
            continue
        if is_literal(value):
            attributes.append((name, "literal", repr(value)))
        elif isinstance(value, torch.Tensor):
            attributes.append((name, "tensor", tuple(value.shape), value.dtype))
        else:
            attributes.append((name, "object", id(value)))
    tensors = tuple((name, None if t is None else (tuple(t.shape), t.dtype))
                    for name, t in [*module._parameters.items(), *module._buffers.items()])
    children = tuple((name, None if child is None else fingerprint(child, memo))
                     for name, child in module._modules.items())
    result = (type(module), tuple(attributes), tensors, children)
    memo[key] = result
    return result


def canonical_term(value: Any, index: ModuleIndex) -> cst.BaseExpression | None:
    """The best term for a static value: a literal, else its path in the model;
    None when neither exists (the caller then keeps the expression that computed it)."""
    if is_literal(value) and not holds_container(value):
        return literal_term(value)
    return index.term_for(value)
