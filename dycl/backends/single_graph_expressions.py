"""Host expressions of the single-graph lowering (``dycl.backends.single_graph``): a value in
value context (``t.item()``, a literal, a list display, a counter's ``n + 1``) and an ``if`` test
(``not``, ``and``/``or``, comparison chains) as what the walk knows or as ONNX values.

Assumes the names an expression reads are in the walk's environment
(``dycl.backends.single_graph_values``). Guarantees: a test the walk knows is a Python bool (the
walk follows one side); any other is a one-element bool value computed exactly as Python would
(a float compared as a double, an integer as int64, truthiness as ``!= 0``); anything else raises
``NotLowerable`` naming the expression and its line."""

from __future__ import annotations

import math
import operator
from typing import Any

import libcst as cst
import numpy as np
from onnx import TensorProto, helper

from dycl.backends.onnx_compose import ELEM, FLOATS, GraphBuilder
from dycl.backends.single_graph_values import (
    SEQUENCES,
    Conflict,
    ListValue,
    NotLowerable,
    Number,
    Static,
    Tensor,
    TupleValue,
    Value,
    python_kind,
)
from dycl.hcfg.nodes import where as _location

#: the largest step a counter held in int64 takes (``HostExpressions.arithmetic``)
COUNTER_LIMIT = 2 ** 31

_COMPARE = {cst.LessThan: ("Less", operator.lt), cst.GreaterThan: ("Greater", operator.gt),
            cst.LessThanEqual: ("LessOrEqual", operator.le), cst.GreaterThanEqual: ("GreaterOrEqual", operator.ge),
            cst.Equal: ("Equal", operator.eq), cst.NotEqual: ("NotEqual", operator.ne)}
_ARITHMETIC = {cst.Add: ("Add", operator.add), cst.Subtract: ("Sub", operator.sub),
               cst.Multiply: ("Mul", operator.mul)}


class HostExpressions:
    """Expression evaluation over an environment; ``root`` is the model's root scope (constants)."""

    root: GraphBuilder

    def constant_as(self, value: Any, dtype: str) -> str:
        """A root-scope constant of ``value`` as ``dtype`` (exact: an integer past 2**53 is not made a double)."""
        if dtype == "float64" and isinstance(value, int) and abs(value) > 2 ** 53:
            raise NotLowerable(f"the integer {value} compared as a double")
        return self.root.constant(np.array(value, dtype))

    def read(self, name: str, env: dict[str, Value], where: Any) -> Value:
        value = env.get(name)
        if value is None:
            raise NotLowerable(f"'{name}' is not a value the graph holds ({location_of(where)})")
        if isinstance(value, Conflict):
            raise NotLowerable(f"'{name}' is read, but {value.reason}")
        return value

    def value(self, expr: cst.BaseExpression, env: dict[str, Value], scope: GraphBuilder, where: Any) -> Value:
        """What ``expr`` (a host expression in value context) gives."""
        if isinstance(expr, cst.Name) and expr.value in ("True", "False", "None"):
            return Static({"True": True, "False": False, "None": None}[expr.value])
        if isinstance(expr, cst.Name):
            return self.read(expr.value, env, where)
        if isinstance(expr, (cst.Integer, cst.Float)):
            return Static(expr.evaluated_value)
        if isinstance(expr, cst.SimpleString):
            return Static(expr.evaluated_value)
        if isinstance(expr, (cst.List, cst.Tuple)) and not any(isinstance(e, cst.StarredElement)
                                                                for e in expr.elements):
            items = [self.value(e.value, env, scope, where) for e in expr.elements]
            return ListValue(items) if isinstance(expr, cst.List) else TupleValue(tuple(items))
        if isinstance(expr, cst.Subscript):
            return self.item_of(expr, env, scope, where)
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
            inner = self.value(expr.expression, env, scope, where)
            if isinstance(inner, Static) and python_kind(inner.value) in ("int", "float"):
                return Static(-inner.value if isinstance(expr.operator, cst.Minus) else inner.value)
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "len" \
                and len(expr.args) == 1 and expr.args[0].keyword is None and not expr.args[0].star:
            sequence = self.value(expr.args[0].value, env, scope, where)
            if isinstance(sequence, SEQUENCES) and "len" not in env:
                return Static(len(sequence.items))
        if (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "item"
                and not expr.args):
            inner = self.value(expr.func.value, env, scope, where)
            if isinstance(inner, (Tensor, Number)):
                return Number(inner.name, inner.elem, _kind_of_elem(inner.elem))
        if isinstance(expr, cst.BinaryOperation) and type(expr.operator) in _ARITHMETIC:
            return self.arithmetic(expr, env, scope, where)
        raise NotLowerable(f"the host expression `{source(expr)}` ({location_of(where)})")

    def item_of(self, expr: cst.Subscript, env: dict[str, Value], scope: GraphBuilder, where: Any) -> Value:
        """``seq[i]`` of a host list or tuple at an index the walk knows (in range, as Python requires)."""
        sequence = self.value(expr.value, env, scope, where)
        element = expr.slice[0].slice if len(expr.slice) == 1 else None
        index = self.value(element.value, env, scope, where) if isinstance(element, cst.Index) else None
        if isinstance(sequence, SEQUENCES) and isinstance(index, Static) and python_kind(index.value) == "int" \
                and -len(sequence.items) <= index.value < len(sequence.items):
            return sequence.items[index.value]
        raise NotLowerable(f"the subscript `{source(expr)}` ({location_of(where)})")

    def arithmetic(self, expr: cst.BinaryOperation, env: dict[str, Value], scope: GraphBuilder, where: Any) -> Value:
        left, right = (self.value(e, env, scope, where) for e in (expr.left, expr.right))
        onnx_op, python = _ARITHMETIC[type(expr.operator)]
        numbers = ("int", "float")
        if isinstance(left, Static) and isinstance(right, Static) and python_kind(left.value) in numbers \
                and python_kind(right.value) in numbers:
            return Static(python(left.value, right.value))
        if {_value_kind(left), _value_kind(right)} == {"int"} and onnx_op in ("Add", "Sub") and all(
                v.counter if isinstance(v, Number) else abs(v.value) < COUNTER_LIMIT for v in (left, right)):
            # a counter: int64 holds it as Python does (each step under COUNTER_LIMIT, finitely many steps)
            names = [v.name if isinstance(v, Number) else self.constant_as(v.value, "int64") for v in (left, right)]
            return Number(scope.op(onnx_op, names), TensorProto.INT64, "int", counter=True)
        raise NotLowerable(f"the host arithmetic `{source(expr)}` ({location_of(where)})")

    def test(self, expr: cst.BaseExpression, env: dict[str, Value], scope: GraphBuilder) -> bool | str:
        """A condition: a Python bool where the walk knows it, else a one-element bool value."""
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
            inner = self.test(expr.expression, env, scope)
            return (not inner) if isinstance(inner, bool) else scope.op("Not", [inner])
        if isinstance(expr, cst.BooleanOperation):
            left = self.test(expr.left, env, scope)
            is_and = isinstance(expr.operator, cst.And)
            if isinstance(left, bool):
                return self.test(expr.right, env, scope) if left == is_and else left
            right = self.test(expr.right, env, scope)
            if isinstance(right, bool):
                return left if right == is_and else right
            return scope.op("And" if is_and else "Or", [left, right])
        if isinstance(expr, cst.Comparison):
            return self.compare(expr, env, scope)
        value = self.value(expr, env, scope, expr)
        if isinstance(value, Static):
            if python_kind(value.value) is None and value.value is not None:
                raise NotLowerable(f"the truth of {value.value!r}")
            return bool(value.value)
        if isinstance(value, (Tensor, Number)):
            scalar = scope.op("Reshape", [value.name, scope.constant(np.array([], np.int64))], "truth")
            if value.elem == TensorProto.BOOL:
                return scalar
            return scope.op("Not", [scope.op("Equal", [scalar, _zero(scope, value.elem)])])
        raise NotLowerable(f"the test `{source(expr)}`")

    def compare(self, expr: cst.Comparison, env: dict[str, Value], scope: GraphBuilder) -> bool | str:
        left = self.value(expr.left, env, scope, expr)
        parts: list[bool | str] = []
        for target in expr.comparisons:
            entry = _COMPARE.get(type(target.operator))
            if entry is None:
                raise NotLowerable(f"the comparison `{source(expr)}`")
            right = self.value(target.comparator, env, scope, expr)
            parts.append(self.compare_pair(left, right, entry, scope, expr))
            left = right
        result: bool | str = True
        for part in parts:  # a chain is the `and` of its comparisons
            if part is False or result is False:
                result = False
            elif part is not True:
                result = part if result is True else scope.op("And", [result, part])
        return result

    def compare_pair(self, left: Value, right: Value, entry: tuple[str, Any], scope: GraphBuilder,
                     expr: cst.BaseExpression) -> bool | str:
        onnx_op, python = entry
        if isinstance(left, Static) and isinstance(right, Static):
            return bool(python(left.value, right.value))
        names = []
        common = _common(left, right)
        if common is None:
            raise NotLowerable(f"the comparison `{source(expr)}` of {describe(left)} with {describe(right)}")
        common = _own_type(left, right) or common
        for value in (left, right):
            if isinstance(value, Static):
                names.append(self.constant_as(value.value, common))
            else:
                scalar = scope.op("Reshape", [value.name, scope.constant(np.array([], np.int64))], "item")
                names.append(scalar if value.elem == ELEM[common] else scope.op("Cast", [scalar], "as",
                                                                                 to=ELEM[common]))
        return scope.op(onnx_op, names, onnx_op.lower())


def _zero(scope: GraphBuilder, elem: int) -> str:
    return scope.constant(np.array(0, helper.tensor_dtype_to_np_dtype(elem)))


def _kind_of_elem(elem: int) -> str:
    return "float" if elem in FLOATS else "bool" if elem == TensorProto.BOOL else "int"


def _value_kind(value: Value) -> str | None:
    if isinstance(value, Number):
        return value.kind
    if isinstance(value, Static):
        return python_kind(value.value)
    return None


def _common(left: Value, right: Value) -> str | None:
    """The dtype two values compare in exactly as Python compares them, or None."""
    kinds = []
    for value in (left, right):
        if isinstance(value, Static):
            kind = python_kind(value.value)
            if kind is None or odd_float(value.value):
                return None
            kinds.append("static-" + kind)
        elif isinstance(value, (Tensor, Number)):
            kinds.append(_kind_of_elem(value.elem))
        else:
            return None
    floats = any(k.endswith("float") for k in kinds)
    if floats:
        # an integer tensor against a float is exact in double only below 2**53: not taken
        return "float64" if all(k.endswith("float") for k in kinds if not k.startswith("static-")) else None
    return "int64"  # bools too: ONNX orders no bools, Python orders them as 0 and 1


#: element types a value may be compared in as it is, against a constant that type holds exactly
_OWN_TYPES = {TensorProto.FLOAT: "float32", TensorProto.DOUBLE: "float64", TensorProto.INT32: "int32",
              TensorProto.INT64: "int64"}


def _own_type(left: Value, right: Value) -> str | None:
    """The dtype of the one tensor side where the other side is a constant it holds exactly: comparing
    there is comparing as Python does (widening a float32 or an int32 is exact and keeps the order),
    without a ``Cast`` per test (BlockDrop's 54 tests each cast its float32 to a double)."""
    sides = [value for value in (left, right) if not isinstance(value, Static)]
    statics = [value.value for value in (left, right) if isinstance(value, Static)]
    if len(sides) != 1 or len(statics) != 1 or not isinstance(sides[0], (Tensor, Number)):
        return None
    dtype = _OWN_TYPES.get(sides[0].elem)
    constant = statics[0]
    if dtype is None or isinstance(constant, bool) or not isinstance(constant, (int, float)) or odd_float(constant):
        return None
    if dtype.startswith("int") and not isinstance(constant, int):
        return None  # an integer against a float: compared as a double (``_common``) or refused
    if isinstance(constant, int) and not -2 ** 53 <= constant <= 2 ** 53:
        return None
    try:
        with np.errstate(over="ignore"):  # a float past float32's range becomes inf, which is not it
            held = np.array(constant, dtype)
    except OverflowError:  # an integer past the type's range: compared in the wider type
        return None
    return dtype if held.item() == constant and type(held.item())(constant) == held.item() else None


def odd_float(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def describe(value: Value) -> str:
    return {Tensor: "a tensor", Number: "a number", Static: "a Python value", ListValue: "a list",
            TupleValue: "a tuple", Conflict: "a value the branches disagree on"}.get(type(value), "a value")


def location_of(node: Any) -> str:
    """The user's file:line of a node or statement, for a refusal's message."""
    statement = getattr(node, "statement", node)
    return _location(statement) or "line unknown"


def source(node: cst.CSTNode) -> str:
    """The code of ``node``, without its location comment."""
    return cst.Module([]).code_for_node(node).strip().split("  #")[0]


__all__ = ["COUNTER_LIMIT", "HostExpressions", "describe", "location_of", "odd_float", "source"]
