"""The top-level ``forward()``'s parameters, bound to how the example called it.

Real models take ``*args``/``**kwargs``, keyword-only and ``None``-default
optional parameters, and defaults that are not literals (``y=torch.randn(2, 3)``).
The rewritten function instead takes one plain parameter per tensor the example
passed (its *inputs*), so that everything after it sees straight-line code over
named values:

=========================================  ==============================================
the example                                the rewritten function
=========================================  ==============================================
passes a tensor for ``x``                  input ``x``
passes a literal for ``flag`` (or omits    ``flag=<value>`` (specialized: a call must pass
it and its default is a literal)           the same value or omit it)
omits ``y`` whose default is not literal   ``y = <the default>`` first (a constant)
passes ``*args`` = (a, 3)                  inputs ``args_0``; ``args = (args_0, 3)`` first
passes ``**kwargs`` = {"mask": m}          input ``kwargs_mask``; ``kwargs = {'mask': kwargs_mask}``
passes a KV cache for ``past`` (a value    inputs ``past_layers_0_keys``, ...;
holding records: ``dycl.model.records``)   ``past = past_structure(...)`` first (one object)
=========================================  ==============================================

``FlatInput`` records where each input comes from and ``fixed`` what each
specialized part must equal, so that a call can be checked against the
example's form (``dycl.model.signature``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import libcst as cst
import torch
from dycl.rewriter.context import GlobalTable
from dycl.rewriter.locations import comment_of, set_location
from dycl.rewriter.names import Namespace
from dycl.rewriter.values import Static, is_literal, literal_term
from dycl.rewriter.vocabulary import READING_METHODS
from dycl.rewriter.walk import bound_names, descendants

from dycl.model.records import Structure, structure_of

_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
_PASSED = object()  # a value the caller passes, not known when no example is given


@dataclass(frozen=True)
class FlatInput:
    """Input ``name`` of the rewritten function is ``forward()``'s ``parameter``,
    or its element ``key`` (an index into ``*args``, a key of ``**kwargs``), or, with
    ``key`` ``(item, position)``, an array of a value holding records passed for it
    (``FlatParameters.structures``)."""

    name: str
    parameter: str
    key: int | str | tuple | None = None


@dataclass
class FlatParameters:
    """The rewritten function's parameters and what the example fixed.

    ``fixed`` lists (parameter, key, value) that a call must pass equal or omit;
    ``absent`` the parameters a call must omit (their default is compiled in);
    ``variadic`` the length of ``*args`` or the keys of ``**kwargs`` the example passed.
    """

    definition: cst.FunctionDef
    statics: dict[str, Static] = field(default_factory=dict)
    specialized: dict[str, Any] = field(default_factory=dict)
    inputs: list[FlatInput] = field(default_factory=list)
    fixed: list[tuple[str, int | str | None, Any]] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)
    variadic: dict[str, int | list[str]] = field(default_factory=dict)
    #: ``(parameter, key or None)`` whose value holds records (``dycl.model.records``): each array is an
    #: input whose key is ``(key, position)``
    structures: dict[tuple[str, int | str | None], Structure] = field(default_factory=dict)


@dataclass(frozen=True)
class ReturnForm:
    """How every ``return value`` of forward() is rewritten when its output holds
    objects the host cannot build: ``out_0, out_1 = leaves(value)`` (its ``count``
    tensor leaves, inside the compiled code) then ``return plain([out_0, out_1])``."""

    leaves: Callable[[Any], tuple]
    count: int
    plain: Callable[[list[str]], str]


def positional_arguments(item: Any) -> tuple:
    """An example or test input as ``forward()``'s positional arguments: a tuple
    is the arguments, anything else the one argument."""
    return item if isinstance(item, tuple) else (item,)


def flatten_returns(definition: cst.FunctionDef, form: ReturnForm, namespace: Namespace,
                    globals_table: GlobalTable) -> cst.FunctionDef:
    """``definition`` with every ``return`` of its own body written as ``form`` says."""
    leaves = globals_table.resolve("_dycl_leaves", {"_dycl_leaves": form.leaves}).term.value

    class Returns(cst.CSTTransformer):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is definition

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

        def leave_SimpleStatementLine(self, original, updated):
            if len(updated.body) != 1 or not isinstance(updated.body[0], cst.Return):
                return updated
            value = updated.body[0].value or cst.Name("None")
            names = [namespace.fresh("out") for _ in range(form.count)]
            targets = ", ".join(names) + ("," if len(names) == 1 else "")
            text = cst.Module([]).code_for_node(value)
            if isinstance(value, cst.Tuple) and not value.lpar:  # `return a, b`: one argument
                text = f"({text})"
            lines = [f"{targets} = {leaves}({text})" if names else f"{leaves}({text})", f"return {form.plain(names)}"]
            return cst.FlattenSentinel([set_location(cst.parse_statement(line), comment_of(original))
                                        for line in lines])

    return definition.visit(Returns())


def flatten_parameters(definition: cst.FunctionDef, signature: inspect.Signature, example: dict[str, Any] | None,
                       namespace: Namespace, globals_table: GlobalTable) -> FlatParameters:
    """``definition`` with one parameter per input of ``example`` (forward()'s
    arguments as passed, by parameter name; None: every parameter without a literal
    default is passed) and the assignments that rebuild the others."""
    parameters = list(signature.parameters.values())
    if example is None:
        example = {p.name: _PASSED for p in parameters[1:]
                   if p.kind not in _VARIADIC and (p.default is inspect.Parameter.empty or not is_literal(p.default))}
    flattener = _Flattener(FlatParameters(definition), namespace, globals_table)
    for param in parameters[1:]:
        flattener.parameter(param, example)
    return flattener.finish(definition, example)


class _Flattener:
    """Collects, parameter by parameter, the inputs, the specialized defaults and
    the *displays* (``*args``/``**kwargs`` or a tensor sequence -> the display of
    what was passed; a left-out non-literal default -> its global) of one call form."""

    def __init__(self, flat: FlatParameters, namespace: Namespace, globals_table: GlobalTable) -> None:
        self.flat = flat
        self.namespace = namespace
        self.globals_table = globals_table
        self.inputs: list[cst.Param] = []
        self.defaults: list[cst.Param] = []
        self.displays: dict[str, str] = {}
        self.structured: set[str] = set()  # parameters whose display builds records: assigned once, first
        self.prologue: list[str] = []  # the records passed in *args/**kwargs, built first

    def parameter(self, param: inspect.Parameter, example: dict[str, Any]) -> None:
        name = param.name
        if param.kind in _VARIADIC:
            passed = example.get(name, () if param.kind is inspect.Parameter.VAR_POSITIONAL else {})
            self._variadic(name, passed)
        elif name in example:
            value = example[name]
            if is_literal(value) and not isinstance(value, (list, dict)):
                _specialize(self.flat, self.defaults, name, value)
            elif _tensor_sequence(value):
                self._sequence(name, value)
            elif (structure := structure_of(value)) is not None:
                self.displays[name] = self._structured(name, structure)
                self.structured.add(name)
            else:
                self._input(FlatInput(name, name))
        elif is_literal(param.default):
            _specialize(self.flat, self.defaults, name, param.default)
        else:
            self.flat.absent.append(name)  # a default that is not a literal: a constant of the compiled model
            self.displays[name] = self.globals_table.resolve(f"{name}_default",
                                                             {f"{name}_default": param.default}).term.value

    def _input(self, flat_input: FlatInput) -> str:
        self.flat.inputs.append(flat_input)
        self.inputs.append(cst.Param(cst.Name(flat_input.name)))
        return flat_input.name

    def _variadic(self, name: str, passed: tuple | dict) -> None:
        items = list(enumerate(passed)) if isinstance(passed, tuple) else list(passed.items())
        self.flat.variadic[name] = len(items) if isinstance(passed, tuple) else [k for k, _ in items]
        terms = []
        for key, value in items:
            if is_literal(value):
                self.flat.fixed.append((name, key, value))
                terms.append(cst.Module([]).code_for_node(literal_term(value)))
                continue
            structure = structure_of(value)
            if structure is not None:  # built once, first: forward may update it in place
                built = self.namespace.fresh(f"{name}_{key}")
                self.prologue.append(f"{built} = {self._structured(name, structure, key)}")
                terms.append(built)
                continue
            fresh = self.namespace.fresh(f"{name}_{key}" if str(key).isidentifier() or isinstance(key, int)
                                         else name)
            terms.append(self._input(FlatInput(fresh, name, key)))
        if isinstance(passed, tuple):
            self.displays[name] = f"({', '.join(terms)}{',' if len(terms) == 1 else ''})"
        else:
            self.displays[name] = f"{{{', '.join(f'{k!r}: {t}' for (k, _), t in zip(items, terms))}}}"

    def _sequence(self, name: str, value: tuple | list) -> None:
        """A tuple or list of tensors: one input per element, like ``*args``."""
        self.flat.variadic[name] = len(value)
        terms = [self._input(FlatInput(self.namespace.fresh(f"{name}_{key}"), name, key)) for key in range(len(value))]
        opening, closing = ("[", "]") if isinstance(value, list) else ("(", ",)" if len(terms) == 1 else ")")
        self.displays[name] = opening + ", ".join(terms) + closing

    def _structured(self, name: str, structure: Structure, key: int | str | None = None) -> str:
        """A value holding records (a KV cache) passed for ``name`` (or its item ``key``): one
        input per array, keyed ``(key, position)``, and the value built afresh from them first
        (``dycl.model.records``). Returns the expression that builds it."""
        self.flat.structures[name, key] = structure
        prefix = name if key is None else f"{name}_{key}" if str(key).isidentifier() or isinstance(key, int) else name
        terms = [self._input(FlatInput(self.namespace.fresh(leaf), name, (key, position)))
                 for position, leaf in enumerate(structure.leaf_names(prefix))]
        build = self.globals_table.resolve(f"{prefix}_structure", {f"{prefix}_structure": structure.build}).term.value
        return f"{build}({', '.join(terms)})"

    def finish(self, definition: cst.FunctionDef, example: dict[str, Any]) -> FlatParameters:
        """The flat definition: a display is substituted for its name where the body
        never rebinds or changes it, else assigned first."""
        flat, displays = self.flat, self.displays
        assigned = {name for stmt in definition.body.body for name in bound_names(stmt)}
        # a dict changed in place must stay one object, not be substituted by its display
        assigned |= {name for name in mutated_names(definition) if displays.get(name, "").startswith(("{", "["))}
        assigned |= self.structured  # one object per call: forward may update it in place
        prologue = [*self.prologue,
                    *(f"{name} = {display}" for name, display in reversed(displays.items()) if name in assigned)]
        substituted = {name: cst.parse_expression(d) for name, d in displays.items() if name not in assigned}
        statements = list(definition.body.body)
        if substituted:
            statements = [s.visit(_Substitute(substituted)) for s in statements]
        where = comment_of(definition)
        lines = [set_location(cst.parse_statement(text), where) for text in prologue]
        body = definition.body.with_changes(body=[*lines, *statements])
        self_param = _all_params(definition)[0]
        params = cst.Parameters(params=[self_param.with_changes(default=None, equal=cst.MaybeSentinel.DEFAULT,
                                                                annotation=None, comma=cst.MaybeSentinel.DEFAULT),
                                        *self.inputs, *self.defaults])
        tensors = {f.name for f in flat.inputs if f.key is None and isinstance(example[f.parameter], torch.Tensor)}
        flat.definition = prune_fixed_branches(definition.with_changes(params=params, body=body), flat.specialized,
                                               tensors | {displays[name] for name in flat.absent})
        return flat


def mutated_names(definition: cst.FunctionDef) -> set[str]:
    """Names whose object the body may change in place: a method call other than a
    reading one (``kwargs.pop("k")``), an item written or deleted (``kwargs["k"] = v``)."""
    names: set[str] = set()
    for node in descendants(definition.body):
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and (
                node.attr.value not in READING_METHODS):
            names.add(node.value.value)
        targets = []
        if isinstance(node, cst.AssignTarget):
            targets = [node.target]
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, cst.Del):
            targets = [node.target]
        for target in targets:
            for part in [target, *descendants(target)]:
                if isinstance(part, cst.Subscript) and isinstance(part.value, cst.Name):
                    names.add(part.value.value)
    return names


class _Substitute(cst.CSTTransformer):
    """Replace reads of ``*args``/``**kwargs`` (never reassigned) by the display of what
    the example passed, folding the lookups real code makes on ``**kwargs`` first:
    ``"k" in kwargs``, ``kwargs.get("k"[, default])`` and ``kwargs["k"]``."""

    def __init__(self, displays: dict[str, cst.BaseExpression]) -> None:
        super().__init__()
        self.displays = displays

    def _dict(self, node: cst.BaseExpression) -> dict[str, cst.BaseExpression] | None:
        display = self.displays.get(node.value) if isinstance(node, cst.Name) else None
        if not isinstance(display, cst.Dict):
            return None
        return {e.key.evaluated_value: e.value for e in display.elements}

    def leave_Comparison(self, original: cst.Comparison, updated: cst.Comparison) -> cst.BaseExpression:
        if len(original.comparisons) == 1 and isinstance(original.left, cst.SimpleString):
            target = original.comparisons[0]
            entries = self._dict(target.comparator)
            if entries is not None and isinstance(target.operator, (cst.In, cst.NotIn)):
                found = original.left.evaluated_value in entries
                return cst.Name(str(found if isinstance(target.operator, cst.In) else not found))
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        func = original.func
        if isinstance(func, cst.Attribute) and func.attr.value == "get" and 1 <= len(original.args) <= 2 and (
                isinstance(original.args[0].value, cst.SimpleString)):
            entries = self._dict(func.value)
            if entries is not None:
                key = original.args[0].value.evaluated_value
                default = updated.args[1].value if len(updated.args) == 2 else cst.Name("None")
                return entries.get(key, default)
        return updated

    def leave_Subscript(self, original: cst.Subscript, updated: cst.Subscript) -> cst.BaseExpression:
        entries = self._dict(original.value)
        if entries is not None and len(original.slice) == 1 and isinstance(original.slice[0].slice, cst.Index):
            key = original.slice[0].slice.value
            if isinstance(key, cst.SimpleString) and key.evaluated_value in entries:
                return entries[key.evaluated_value]
        return updated

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        return self.displays.get(original.value, updated)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        return updated.with_changes(attr=original.attr)

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)


_TEST_NODES = (cst.Name, cst.Comparison, cst.ComparisonTarget, cst.Is, cst.IsNot, cst.Equal, cst.NotEqual,
               cst.UnaryOperation, cst.Not, cst.BooleanOperation, cst.And, cst.Or, cst.SimpleString, cst.Integer,
               cst.BinaryOperation, cst.BitXor,
               cst.LeftParen, cst.RightParen, cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.Newline,
               cst.TrailingWhitespace, cst.EmptyLine)


def prune_fixed_branches(definition: cst.FunctionDef, specialized: dict[str, Any],
                         inputs: set[str] = frozenset()) -> cst.FunctionDef:
    """Keep only the taken branch of every ``if`` whose test reads nothing but
    specialized parameters that still hold their passed value where the test runs
    (``if labels is not None:`` with ``labels`` left at ``None``): code there is never
    run for this call form, so an unsupported construct inside it (``self.config.x =
    ...``) must not stop the compile. A parameter holds its value at a test of the
    function's top-level ``if``/``elif`` chains when no earlier top-level statement
    binds it; at any other ``if`` when the function never binds it. A tensor input
    (never None: the host takes only arrays for it) may appear as an operand of
    ``is``/``is not`` only. Evaluated on an explicit namespace holding only those values."""
    initial: dict[str, Any] = dict(specialized)
    initial.update({name: _PASSED for name in inputs})
    if not initial:
        return definition
    assigned = bound_names(definition.body)
    everywhere = {name: value for name, value in initial.items() if name not in assigned}
    known_at: dict[int, dict[str, Any]] = {}
    bound_before: set[str] = set()
    for statement in definition.body.body:
        chain = statement
        while isinstance(chain, cst.If):
            known_at[id(chain)] = {name: value for name, value in initial.items() if name not in bound_before}
            chain = chain.orelse
        bound_before |= bound_names(statement)
    return definition.visit(_PruneFixedBranches(definition, known_at, everywhere))


def _decide(test: cst.BaseExpression, known: dict[str, Any]) -> bool | None:
    """The value of ``test`` if it reads only ``known`` names (see prune_fixed_branches)."""
    nodes = list(descendants(test)) + [test]
    names = {n.value for n in nodes if isinstance(n, cst.Name)} - {"None", "True", "False"}
    if not names or not names <= set(known) or not all(isinstance(n, _TEST_NODES) for n in nodes):
        return None
    identity_operands = {id(part) for n in nodes if isinstance(n, cst.Comparison)
                         and all(isinstance(c.operator, (cst.Is, cst.IsNot)) for c in n.comparisons)
                         for part in [n.left, *(c.comparator for c in n.comparisons)]}
    if any(isinstance(n, cst.Name) and known.get(n.value) is _PASSED and id(n) not in identity_operands
           for n in nodes):
        return None
    text = cst.Module([]).code_for_node(test)
    return bool(eval(compile(text, "<dycl-test>", "eval"), {"__builtins__": {}}, dict(known)))  # noqa: S307


class _PruneFixedBranches(cst.CSTTransformer):
    """Replaces each decided ``if`` by its taken branch (``prune_fixed_branches``); an
    ``elif`` sits in its parent's ``orelse`` (one node, not a list of statements), so a
    taken one becomes ``else:`` and one not taken becomes its own ``orelse``."""

    def __init__(self, definition: cst.FunctionDef, known_at: dict[int, dict[str, Any]],
                 everywhere: dict[str, Any]) -> None:
        super().__init__()
        self.definition, self.known_at, self.everywhere = definition, known_at, everywhere
        self.elifs: set[int] = set()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return node is self.definition

    def visit_If(self, node: cst.If) -> None:
        if isinstance(node.orelse, cst.If):
            self.elifs.add(id(node.orelse))

    def leave_If(self, original: cst.If, updated: cst.If):
        taken = _decide(updated.test, self.known_at.get(id(original), self.everywhere))
        elif_ = id(original) in self.elifs
        if taken is None:
            return updated
        if taken:
            return cst.Else(body=updated.body, leading_lines=updated.leading_lines) if elif_ else \
                cst.FlattenSentinel(list(updated.body.body))
        if updated.orelse is None:
            return cst.RemoveFromParent()
        if isinstance(updated.orelse, cst.If) or elif_:
            return updated.orelse
        return cst.FlattenSentinel(list(updated.orelse.body.body))

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock):
        if not updated.body:
            return updated.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])
        return updated


def _tensor_sequence(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and type(value) in (tuple, list) and bool(value) and all(
        isinstance(v, torch.Tensor) for v in value)


def _specialize(flat: FlatParameters, defaults: list[cst.Param], name: str, value: Any) -> None:
    flat.specialized[name] = value
    flat.statics[name] = Static(value, literal_term(value))
    flat.fixed.append((name, None, value))
    defaults.append(cst.Param(cst.Name(name), default=literal_term(value),
                              equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))))


def _all_params(definition: cst.FunctionDef) -> list[cst.Param]:
    params = definition.params
    return [*params.posonly_params, *params.params, *params.kwonly_params]


__all__ = ["FlatInput", "FlatParameters", "ReturnForm", "flatten_parameters", "flatten_returns", "mutated_names",
           "positional_arguments"]
