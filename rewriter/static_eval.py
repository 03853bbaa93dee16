"""Evaluate libcst expressions whose value does not depend on the model inputs.

The evaluator interprets a small, explicit subset of Python over real objects
(the model, its config, Python literals, global modules); it never calls
``eval`` and never calls a function that is not on the allow-list below, so
no tensor computation and no user code runs at compile time. Anything it
cannot prove static is reported as dynamic (``None``) and left in the code.
"""

from __future__ import annotations

import builtins
import itertools
import math
import operator
from collections.abc import Callable
from typing import Any, Protocol

import libcst as cst
import torch
from dycl.rewriter.config_reads import ConfigReads, holds_config
from dycl.rewriter.library_calls import call_on_literals, is_library_function
from dycl.rewriter.mode_predicates import mode_predicate_value
from dycl.rewriter.pure_methods import is_pure_method, receiver_reads
from dycl.rewriter.registry_lookups import chose_a_function, is_registry_lookup, lookup_arguments_static
from dycl.rewriter.state_properties import attribute_may_read_state
from dycl.rewriter.state_table import StateTable
from dycl.rewriter.substitute import replace_names
from dycl.rewriter.values import (
    CONTAINERS,
    DictKeys,
    FreshContainers,
    ListLength,
    ModuleIndex,
    Static,
    canonical_term,
)
from dycl.rewriter.vocabulary import CONTAINER_MUTATORS, TENSOR_METADATA_ATTRIBUTES, TENSOR_METADATA_METHODS

_ALLOWED_BUILTIN_NAMES = (
    "len range enumerate zip reversed int float str bool tuple list dict min max abs sum sorted "
    "round divmod isinstance issubclass hasattr getattr type repr any all pow set frozenset"
)
_ALLOWED_BUILTINS = {getattr(builtins, name) for name in _ALLOWED_BUILTIN_NAMES.split()}
_CONSTRUCTORS = frozenset({list, dict, set, sorted, bytearray})
_PURE_RECEIVERS = (str, bytes, tuple, list, dict, int, float, range, frozenset, torch.Size, torch.dtype)
_MODULE_METHODS = {"items", "keys", "values", "children", "named_children", "modules", "named_modules",
                   "parameters", "named_parameters", "buffers", "named_buffers", "__len__", "__contains__",
                   "get", "extra_repr"}

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    cst.Add: operator.add, cst.Subtract: operator.sub, cst.Multiply: operator.mul,
    cst.Divide: operator.truediv, cst.FloorDivide: operator.floordiv, cst.Modulo: operator.mod,
    cst.Power: operator.pow, cst.LeftShift: operator.lshift, cst.RightShift: operator.rshift,
    cst.BitAnd: operator.and_, cst.BitOr: operator.or_, cst.BitXor: operator.xor,
}
_UNARY: dict[type, Callable[[Any], Any]] = {
    cst.Minus: operator.neg, cst.Plus: operator.pos, cst.Not: operator.not_, cst.BitInvert: operator.invert,
}
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    cst.Equal: operator.eq, cst.NotEqual: operator.ne, cst.LessThan: operator.lt,
    cst.LessThanEqual: operator.le, cst.GreaterThan: operator.gt, cst.GreaterThanEqual: operator.ge,
    cst.Is: operator.is_, cst.IsNot: operator.is_not,
    cst.In: lambda a, b: a in b, cst.NotIn: lambda a, b: a not in b,
}


class Scope(Protocol):
    """Resolves a name to what is known about it at one program point."""

    def lookup(self, name: str) -> Static | ListLength | DictKeys | None: ...


class _Dynamic(Exception):
    """Internal: the expression depends on something not known statically."""


# what the evaluator may iterate: containers, views, and the builtins' iterators over them
_STATIC_ITERABLES = (list, tuple, dict, set, frozenset, range, str, torch.Size, type({}.keys()), type({}.values()),
                     type({}.items()), enumerate, zip, reversed, torch.nn.ModuleList, torch.nn.Sequential,
                     torch.nn.ModuleDict)
_MAX_COMPREHENSION = 4096


class _LoopScope:
    """A comprehension's loop variables over the scope around it."""

    def __init__(self, outer: Scope, names: dict[str, Static]) -> None:
        self.outer = outer
        self.names = names

    def lookup(self, name: str) -> Static | ListLength | DictKeys | None:
        return self.names[name] if name in self.names else self.outer.lookup(name)


def _bind(target: cst.BaseExpression, value: Any) -> dict[str, Static]:
    """The loop variables ``target`` binds to ``value`` (a name, or a tuple of targets)."""
    if isinstance(target, cst.Name):
        return {target.value: Static(value, cst.Name(target.value))}
    if isinstance(target, (cst.Tuple, cst.List)) and not any(isinstance(e, cst.StarredElement)
                                                             for e in target.elements):
        parts = tuple(value)
        if len(parts) != len(target.elements):
            raise _Dynamic
        names: dict[str, Static] = {}
        for element, part in zip(target.elements, parts):
            names.update(_bind(element.value, part))
        return names
    raise _Dynamic


def _truth(value: Any) -> bool:
    if _is_tensor(value):
        raise _Dynamic
    return bool(value)


def _is_tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor)


def _allowed_call(func: Any) -> bool:
    if func in _ALLOWED_BUILTINS:
        return True
    if getattr(func, "__module__", None) == "math" or getattr(func, "__self__", None) is math:
        return True
    receiver = getattr(func, "__self__", None)
    name = getattr(func, "__name__", "")
    if receiver is None or name in CONTAINER_MUTATORS:
        return False
    if isinstance(receiver, _PURE_RECEIVERS):
        return True
    if isinstance(receiver, torch.nn.Module):
        return name in _MODULE_METHODS or is_pure_method(func)
    if _is_tensor(receiver):
        return name in TENSOR_METADATA_METHODS
    return False


class StaticEvaluator:
    """Evaluates expressions against a ``Scope``; ``evaluate`` returns a ``Static``
    or ``None`` when the expression is dynamic."""

    def __init__(self, scope: Scope, index: ModuleIndex, fresh: FreshContainers | None = None,
                 state: StateTable | None = None, reads: ConfigReads | None = None) -> None:
        self.scope = scope
        self.index = index
        self.fresh = fresh if fresh is not None else FreshContainers()
        self.state = state  # module state forward() writes: never folded (rewriter.state_table)
        self.reads = reads  # the modules' Python values read: guarded after compiling (rewriter.config_reads)

    def evaluate(self, node: cst.BaseExpression) -> Static | None:
        try:
            value = self._value(node)
        except _Dynamic:
            return None
        except Exception:  # the user's own code would raise here at run time: leave it dynamic
            return None
        term = canonical_term(value, self.index)
        return Static(value, self.close(node) if term is None else term)

    def close(self, node: cst.BaseExpression) -> cst.BaseExpression:
        """``node`` with every static name replaced by its term (a closed expression)."""

        def term_of(name: str) -> cst.BaseExpression | None:
            fact = self.scope.lookup(name)
            return fact.term if isinstance(fact, Static) else None

        return replace_names(node, term_of)

    def list_length(self, node: cst.BaseExpression) -> int | None:
        """The static length of a dynamic list named by ``node``, if known."""
        if isinstance(node, cst.Name):
            fact = self.scope.lookup(node.value)
            if isinstance(fact, ListLength):
                return fact.length
        return None

    # -- the interpreter ---------------------------------------------------------------

    def _value(self, node: cst.BaseExpression) -> Any:
        method = getattr(self, "_eval_" + type(node).__name__, None)
        if method is None:
            raise _Dynamic
        return method(node)

    def _eval_Integer(self, node: cst.Integer) -> Any:
        return int(node.value.replace("_", ""), 0)

    def _eval_Float(self, node: cst.Float) -> Any:
        return float(node.value.replace("_", ""))

    def _eval_SimpleString(self, node: cst.SimpleString) -> Any:
        return node.evaluated_value

    _eval_Imaginary = _eval_SimpleString

    def _eval_ConcatenatedString(self, node: cst.ConcatenatedString) -> Any:
        return self._value(node.left) + self._value(node.right)

    def _eval_FormattedString(self, node: cst.FormattedString) -> str:
        parts = []
        for part in node.parts:
            if isinstance(part, cst.FormattedStringText):
                parts.append(part.value)
                continue
            value = self._value(part.expression)
            if part.conversion == "r":
                value = repr(value)
            elif part.conversion == "s":
                value = str(value)
            elif part.conversion == "a":
                value = ascii(value)
            spec = ""
            if part.format_spec:
                spec = self._eval_FormattedString(cst.FormattedString(parts=part.format_spec))
            parts.append(format(value, spec))
        return "".join(parts)

    def _eval_Name(self, node: cst.Name) -> Any:
        fact = self.scope.lookup(node.value)
        if isinstance(fact, Static):
            return fact.value
        raise _Dynamic

    def _eval_Attribute(self, node: cst.Attribute) -> Any:
        base = self._value(node.value)
        name = node.attr.value
        if _is_tensor(base) and name not in TENSOR_METADATA_ATTRIBUTES:
            raise _Dynamic
        if self.state is not None and attribute_may_read_state(self.state, base, name):
            raise _Dynamic
        value = getattr(base, name)
        if self.reads is not None and holds_config(base):
            self.reads.record(base, name, value)
        return value

    def _eval_Subscript(self, node: cst.Subscript) -> Any:
        keys = self._dict_keys(node.value)
        if keys is not None and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            known = self.scope.lookup(node.value.value).value_of(self._value(node.slice[0].slice.value))
            if known is None:
                raise _Dynamic
            return known.value
        base = self._value(node.value)
        if _is_tensor(base):
            raise _Dynamic
        keys = [self._slice_element(e.slice) for e in node.slice]
        result = base[keys[0] if len(keys) == 1 else tuple(keys)]
        if isinstance(keys[0], slice) and isinstance(result, CONTAINERS) and result is not base:
            self.fresh.add(result)
        return result

    def _slice_element(self, element: cst.BaseSlice) -> Any:
        if isinstance(element, cst.Index):
            return self._value(element.value)
        assert isinstance(element, cst.Slice)
        parts = [None if p is None else self._value(p) for p in (element.lower, element.upper, element.step)]
        return slice(*parts)

    def _eval_Call(self, node: cst.Call) -> Any:
        func_node = node.func
        if isinstance(func_node, cst.Attribute) and func_node.attr.value == "get":
            keys = self._dict_keys(func_node.value)
            if keys is not None:
                return self._get(self.scope.lookup(func_node.value.value), node)
        if isinstance(func_node, cst.Attribute) and func_node.attr.value == "pop" and len(node.args) == 2:
            keys = self._dict_keys(func_node.value)
            if keys is not None and self._value(node.args[0].value) not in keys:
                return self._get(self.scope.lookup(func_node.value.value), node)  # no such key: the default
        func = self._value(func_node)
        if func is len and len(node.args) == 1:
            length = self.list_length(node.args[0].value)
            keys = self._dict_keys(node.args[0].value)
            if length is not None or keys is not None:
                return length if length is not None else len(keys)
        if not node.args and (mode := mode_predicate_value(func, [], {})) is not None:
            return mode  # torch.jit.is_scripting(), torch.is_grad_enabled(): rewriter.mode_predicates
        lookup = is_registry_lookup(func)
        library = not lookup and is_library_function(func)
        if not (lookup or library or _allowed_call(func)):
            raise _Dynamic
        args, kwargs = [], {}
        for arg in node.args:
            value = self._value(arg.value)
            if arg.star == "*":
                args.extend(value)
            elif arg.star == "**":
                kwargs.update(value)
            elif arg.keyword is not None:
                kwargs[arg.keyword.value] = value
            else:
                args.append(value)
        if func not in (len, isinstance, type, hasattr, getattr, issubclass) and any(
            _is_tensor(a) for a in [*args, *kwargs.values()]
        ):
            raise _Dynamic
        if func is getattr and len(args) >= 2 and isinstance(args[1], str):
            return self._getattr(args)
        if lookup:
            return self._lookup(func, args, kwargs)
        if library:
            folded, result = call_on_literals(func, args, kwargs, self.fresh.add)
            if not folded:
                raise _Dynamic
            return result
        if self.state is not None and is_pure_method(func) and any(
                self.state.holds(func.__self__, name) for name in receiver_reads(func)):
            raise _Dynamic  # it reads module state forward() writes (rewriter.state_properties)
        result = func(*args, **kwargs)
        if is_pure_method(func):
            if _is_tensor(result):  # a method returning a weight or a buffer: not folded
                raise _Dynamic
            for name in receiver_reads(func) if self.reads is not None else ():
                self.reads.record(func.__self__, name, getattr(func.__self__, name))
        if func in _CONSTRUCTORS or (getattr(func, "__name__", "") == "copy"
                                     and isinstance(getattr(func, "__self__", None), CONTAINERS)):
            self.fresh.add(result)
        return result

    def _getattr(self, args: list[Any]) -> Any:
        """``getattr(owner, "name"[, default])``: never a slot's value; a module's value is a config read."""
        owner, name = args[0], args[1]
        if self.state is not None and attribute_may_read_state(self.state, owner, name):
            raise _Dynamic
        value = getattr(*args)
        if self.reads is not None and holds_config(owner) and hasattr(owner, name):
            self.reads.record(owner, name, value)
        return value

    def _lookup(self, func: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """A library registry's lookup of an implementation (``rewriter.registry_lookups``)."""
        if not lookup_arguments_static(args, kwargs):
            raise _Dynamic
        result = func(*args, **kwargs)
        if not chose_a_function(result):
            raise _Dynamic
        return result

    def _eval_BinaryOperation(self, node: cst.BinaryOperation) -> Any:
        left, right = self._value(node.left), self._value(node.right)
        if _is_tensor(left) or _is_tensor(right) or type(node.operator) not in _BINARY:
            raise _Dynamic
        result = _BINARY[type(node.operator)](left, right)
        if isinstance(result, CONTAINERS) and result is not left and result is not right:
            self.fresh.add(result)
        return result

    def _eval_UnaryOperation(self, node: cst.UnaryOperation) -> Any:
        operand = self._value(node.expression)
        if _is_tensor(operand):
            raise _Dynamic
        return _UNARY[type(node.operator)](operand)

    def _eval_BooleanOperation(self, node: cst.BooleanOperation) -> Any:
        left = self._value(node.left)
        if _is_tensor(left):
            raise _Dynamic
        if isinstance(node.operator, cst.And):
            return self._value(node.right) if left else left
        return left if left else self._value(node.right)

    def _get(self, fact: DictKeys, node: cst.Call) -> Any:
        """``d.get(k[, default])`` on a dynamic dict: the default where ``k`` is not a key,
        the value where it is known."""
        if not 1 <= len(node.args) <= 2 or any(arg.star or arg.keyword for arg in node.args):
            raise _Dynamic
        key = self._value(node.args[0].value)
        hash(key)
        if key not in fact.keys:
            return self._value(node.args[1].value) if len(node.args) == 2 else None
        known = fact.value_of(key)
        if known is None:
            raise _Dynamic
        return known.value

    def _dict_keys(self, node: cst.BaseExpression) -> tuple | None:
        """The keys of a dynamic dict named by ``node`` (a ``DictKeys`` fact), if known."""
        fact = self.scope.lookup(node.value) if isinstance(node, cst.Name) else None
        return fact.keys if isinstance(fact, DictKeys) else None

    def _eval_Comparison(self, node: cst.Comparison) -> Any:
        left = self._value(node.left)
        for target in node.comparisons:
            op = type(target.operator)
            keys = self._dict_keys(target.comparator) if op in (cst.In, cst.NotIn) else None
            if keys is not None:  # ``"mask" in kwargs``: the key set is known, the values need not be
                if _is_tensor(left):
                    raise _Dynamic
                hash(left)  # an unhashable key raises TypeError at run time: left dynamic
                if (left in keys) is (op is cst.NotIn):
                    return False
                if target is not node.comparisons[-1]:
                    raise _Dynamic  # a chain going on compares the dict itself
                continue
            right = self._value(target.comparator)
            if op not in (cst.Is, cst.IsNot) and (_is_tensor(left) or _is_tensor(right)):
                raise _Dynamic
            if not _COMPARE[op](left, right):
                return False
            left = right
        return True

    def _eval_IfExp(self, node: cst.IfExp) -> Any:
        test = self._value(node.test)
        if _is_tensor(test):
            raise _Dynamic
        return self._value(node.body if test else node.orelse)

    def _elements(self, elements) -> list[Any]:
        values: list[Any] = []
        for element in elements:
            if isinstance(element, cst.StarredElement):
                values.extend(self._value(element.value))
            else:
                values.append(self._value(element.value))
        return values

    def _eval_Tuple(self, node: cst.Tuple) -> tuple:
        return tuple(self._elements(node.elements))

    def _eval_List(self, node: cst.List) -> list:
        return self.fresh.add(self._elements(node.elements))

    def _eval_Set(self, node: cst.Set) -> set:
        return self.fresh.add(set(self._elements(node.elements)))

    def _eval_ListComp(self, node: cst.ListComp) -> list:
        return self.fresh.add([value for _, value in self._comprehension(node, lambda e: e._value(node.elt))])

    def _eval_SetComp(self, node: cst.SetComp) -> set:
        return self.fresh.add({value for _, value in self._comprehension(node, lambda e: e._value(node.elt))})

    def _eval_DictComp(self, node: cst.DictComp) -> dict:
        pairs = self._comprehension(node, lambda e: (e._value(node.key), e._value(node.value)))
        return self.fresh.add(dict(pair for _, pair in pairs))

    def _comprehension(self, node: cst.BaseComp, element: Callable[[StaticEvaluator], Any]) -> list[tuple[None, Any]]:
        """The elements of a comprehension over static iterables, each computed by ``element``
        under the loop variables (an evaluator whose scope binds them); nothing is run that
        the evaluator would not run outside a comprehension."""
        results: list[tuple[None, Any]] = []

        def run(comp: cst.CompFor, evaluator: StaticEvaluator) -> None:
            if comp.asynchronous is not None:
                raise _Dynamic
            iterable = evaluator._value(comp.iter)
            if not isinstance(iterable, _STATIC_ITERABLES):
                raise _Dynamic
            items = list(itertools.islice(iter(iterable), _MAX_COMPREHENSION + 1))
            if len(items) > _MAX_COMPREHENSION:
                raise _Dynamic
            for item in items:
                inner = StaticEvaluator(_LoopScope(evaluator.scope, _bind(comp.target, item)), self.index,
                                        self.fresh, self.state, self.reads)
                if not all(_truth(inner._value(test.test)) for test in comp.ifs):
                    continue
                if comp.inner_for_in is not None:
                    run(comp.inner_for_in, inner)
                else:
                    results.append((None, element(inner)))

        run(node.for_in, self)
        return results

    def _eval_Dict(self, node: cst.Dict) -> dict:
        result = {}
        for element in node.elements:
            if isinstance(element, cst.StarredDictElement):
                result.update(self._value(element.value))
            else:
                result[self._value(element.key)] = self._value(element.value)
        return self.fresh.add(result)

