"""The single-graph lowering (issue 29): a whole HCFG as one ONNX model with ``If`` nodes.

The walk follows the HCFG in program order, keeping what it knows of each host variable
(``dycl.backends.single_graph_values``). A sub-DNN's exported graph is inlined (values renamed,
weights hoisted and shared: ``dycl.backends.onnx_compose``); a host statement of the kinds the
host uses for bookkeeping (``a = b``, ``n = 1``, ``n += 1``, ``l = []``, ``l.append(v)``) changes
the environment; an ``if`` whose test the walk knows follows its one side, and any other test
(a comparison of ``t.item()``, ``mask``, numbers against constants, ``not``, ``and``/``or``) is
computed in the graph and becomes an ``If``:

- both sides return: the ``If`` yields the result slots of both (``_Result``);
- one side returns: the other side continues with the rest of the block, inside the ``If``;
- a side returns on some of its paths only: both sides continue with the rest (lowered twice,
  within ``REPEAT_LIMIT``);
- neither returns (a join): the ``If`` yields the values the sides disagree on, and the walk
  continues after it; where the sides leave a value read later in ways one ONNX value cannot
  hold (a list appended to on one side only, as a greedy decoder's ``break`` leaves it), the
  rest goes into each side instead (within ``REPEAT_LIMIT``), each side knowing its own value.

Every ``return`` is a path with a number: the model outputs every path's tensors in shared
slots (by element type), the number of the path taken and each of the model's conditions'
outcome (``dycl.backends.single_graph_decisions``: what coverage reads in place of host lines);
``emit`` of the host picks the path's return by that number (``dycl.backends.single_graph_host``).

Host expressions (values, tests) are evaluated by ``dycl.backends.single_graph_expressions``.

Soundness: anything the walk cannot prove it computes as the host does raises
``NotLowerable`` naming the construct (a host operation of another kind, a test on sizes, a
sub-DNN with shape guards or graphs for other sizes, a value the branches disagree on that is
read later, a ``return`` inside a join): the compiler then keeps the host, unchanged.
Comparisons are exact: a float tensor is compared as a double (as Python compares its
``.item()``), an integer one as int64."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import libcst as cst
import numpy as np
import onnx
from onnx import TensorProto, helper

from dycl.backends.base import CompiledVariant
from dycl.backends.onnx_compose import ELEM, ComposeError, GraphBuilder
from dycl.backends.single_graph_decisions import KEY, Numbering, align, decide, vector
from dycl.backends.single_graph_expressions import HostExpressions, describe, location_of, odd_float, source
from dycl.backends.single_graph_values import (
    SEQUENCES,
    Join,
    ListValue,
    NotLowerable,
    Number,
    Static,
    Tensor,
    Value,
    copy_env,
    python_kind,
)
from dycl.hcfg.graph import HCFG, Block, Cond, HostOp, Return, SubDNN, always_returns, walk
from dycl.hcfg.ports import Port, Variant

#: how many times its own nodes the rest of a block repeated in the sides of ifs may add to a graph
REPEAT_LIMIT = 2


class _Conflicted(Exception):
    """A join's sides leave a live name in ways one value cannot hold (``_Walk.join``)."""


@dataclass
class _Result:
    """A block that returns on every path, lowered in one scope: its slots (value, element
    type) and, per path number, the returned structure over slot indices; ``path``: the value
    holding the number of the path taken."""

    slots: list[tuple[str, int]]
    trees: dict[int, Any]
    path: str
    decisions: str  # the vector of the conditions' outcomes (``single_graph_decisions``)


@dataclass
class Lowered:
    """The whole model as one ONNX graph: ``slot_types`` (ONNX element types) of its outputs before
    the path number and the conditions' outcomes (``conditions`` of them), and each path's
    ``Return`` with its structure over the slots."""

    model: bytes
    slot_types: list[int]
    paths: list[tuple[Return, Any]]
    stats: dict[str, int] = field(default_factory=dict)
    conditions: int = 0


class _Walk(HostExpressions):
    def __init__(self, graph: HCFG, variants: Sequence[Variant], compiled: Mapping[str, CompiledVariant],
                 root: GraphBuilder) -> None:
        self.graph = graph
        self.by_sub: dict[int, list[Variant]] = {}
        for variant in variants:
            self.by_sub.setdefault(variant.sub.index, []).append(variant)
        self.compiled = compiled
        self.root = root
        self.returns: dict[int, Return] = {}
        self.models: dict[str, onnx.ModelProto] = {}
        self.inlined = 0
        self.repeated = 0
        self.conflicting: set[int] = set()  # ids of the joins known to conflict (``join``)
        self.numbering = Numbering(graph)

    # -- blocks ---------------------------------------------------------------------------------

    def terminal(self, block: Block, env: dict[str, Value], scope: GraphBuilder) -> _Result:
        """``block``, which runs to the end of the function, lowered into ``scope``."""
        for position, node in enumerate(block):
            if isinstance(node, Return):
                return self.returned(node, env, scope)
            if isinstance(node, Cond):
                rest = block[position + 1:]
                test = self.test(node.test, env, scope)
                if isinstance(test, bool):
                    decide(env, self.numbering.of(node), test)
                    return self.terminal((node.then if test else node.orelse) + rest, env, scope)
                if always_returns(node.then) or always_returns(node.orelse) or _may_return(node):
                    # a side that may fall through continues with the rest, inside the If (where
                    # both may, the rest is lowered twice: ``self.repeats`` bounds that)
                    then = node.then if always_returns(node.then) else node.then + rest
                    orelse = node.orelse if always_returns(node.orelse) else node.orelse + rest
                    if not (always_returns(node.then) or always_returns(node.orelse)):
                        self.repeat(rest)
                    return self.branch_results(node, test, then, orelse, env, scope)
                inlined = self.inlined
                try:
                    if id(node) in self.conflicting:
                        raise _Conflicted
                    env = self.join(node, test, env, scope)
                except _Conflicted:  # the sides leave a value the rest reads differently: it goes into each
                    self.inlined = inlined  # the sides tried are dropped (their weights: ``GraphBuilder.model``)
                    self.repeat(rest)
                    return self.branch_results(node, test, node.then + rest, node.orelse + rest, env, scope)
                continue
            self.straight(node, env, scope)
        return self.returned(None, env, scope)

    def repeat(self, rest: Block) -> None:
        """Count the nodes of ``rest`` lowered once more; refuse past ``REPEAT_LIMIT`` times the graph's."""
        self.repeated += sum(1 for _ in walk(rest))
        if self.repeated > REPEAT_LIMIT * max(1, sum(1 for _ in walk(self.graph.body))):
            raise NotLowerable("returns inside ifs whose other paths continue would repeat too much of the graph")

    def falling(self, block: Block, env: dict[str, Value], scope: GraphBuilder) -> dict[str, Value]:
        """``block``, one side of a join (no ``return`` in it), lowered into ``scope``."""
        for node in block:
            if isinstance(node, Cond):
                test = self.test(node.test, env, scope)
                if isinstance(test, bool):
                    decide(env, self.numbering.of(node), test)
                    env = self.falling(node.then if test else node.orelse, env, scope)
                else:
                    env = self.join(node, test, env, scope)
            else:
                self.straight(node, env, scope)
        return env

    def join(self, node: Cond, test: str, env: dict[str, Value], scope: GraphBuilder) -> dict[str, Value]:
        """The environment after ``node``'s ``If`` in ``scope``; ``_Conflicted`` where the sides leave a
        name read later in ways one value cannot hold (a list's length, a tensor against a number):
        an enclosing ``terminal`` lowers what follows on each side instead. A conflict inside a side
        is raised at once: the enclosing join would conflict too, or the read would be refused."""
        if any(isinstance(n, Return) for n in walk(node.then + node.orelse)):
            raise NotLowerable(f"a return inside an if whose other paths continue ({location_of(node.statement)})")
        sides = [scope.branch(), scope.branch()]
        try:
            env_then, env_else = self.side_envs(node, env)
            env_then = self.falling(node.then, env_then, sides[0])
            env_else = self.falling(node.orelse, env_else, sides[1])
            align(env_then, env_else, scope)
            joined = Join(env_then, env_else, lambda value, elem: (_constant(scope, value, elem),) * 2)
            live = self.graph.liveness.after.get(id(node))  # None: not the graph's node; every name may be read
            conflicted = joined.conflicted()
            if conflicted and (live is None or conflicted & live):
                raise _Conflicted
        except _Conflicted:
            self.conflicting.add(id(node))  # where it is met again (in a side of an enclosing if), not tried
            raise
        if not joined.pairs:
            outputs: list[str] = []
        else:
            then = [p[0] for p in joined.pairs]
            orelse = [p[1] for p in joined.pairs]
            outputs = scope.if_(test, sides[0], sides[1], then, orelse, [p[2] for p in joined.pairs], "join")
        return joined.finish(outputs)

    def side_envs(self, node: Cond, env: dict[str, Value]) -> tuple[dict[str, Value], dict[str, Value]]:
        """Copies of ``env`` for the sides of ``node``, each knowing the outcome it stands for."""
        number = self.numbering.of(node)
        envs = copy_env(env), copy_env(env)
        decide(envs[0], number, True)
        decide(envs[1], number, False)
        return envs

    def branch_results(self, node: Cond, test: str, then: Block, orelse: Block, env: dict[str, Value],
                       scope: GraphBuilder) -> _Result:
        sides = [scope.branch(), scope.branch()]
        env_then, env_else = self.side_envs(node, env)
        results = [self.terminal(then, env_then, sides[0]), self.terminal(orelse, env_else, sides[1])]
        slots: list[int] = []  # element types of the merged slots
        maps = []
        for result in results:
            free = list(range(len(slots)))
            mapping = []
            for _, elem in result.slots:
                found = next((i for i in free if slots[i] == elem), None)
                if found is None:
                    slots.append(elem)
                    found = len(slots) - 1
                else:
                    free.remove(found)
                mapping.append(found)
            maps.append(mapping)
        yields = []
        for side, result, mapping in zip(sides, results, maps):
            own = {slot: result.slots[i][0] for i, slot in enumerate(mapping)}
            yields.append([own.get(slot) or _empty(side, elem) for slot, elem in enumerate(slots)]
                          + [result.path, result.decisions])
        outputs = scope.if_(test, sides[0], sides[1], yields[0], yields[1],
                            [*slots, TensorProto.INT64, TensorProto.INT64], "exit")
        trees = {}
        for result, mapping in zip(results, maps):
            for number, tree in result.trees.items():
                trees[number] = _remap(tree, mapping)
        return _Result([(out, elem) for out, elem in zip(outputs, slots)], trees, outputs[-2], outputs[-1])

    # -- nodes ----------------------------------------------------------------------------------

    def straight(self, node: Any, env: dict[str, Value], scope: GraphBuilder) -> None:
        if isinstance(node, SubDNN):
            self.sub_dnn(node, env, scope)
        elif isinstance(node, HostOp):
            self.host_op(node, env, scope)
        else:
            raise NotLowerable(f"a {type(node).__name__} where straight-line code was expected")

    def sub_dnn(self, node: SubDNN, env: dict[str, Value], scope: GraphBuilder) -> None:
        values = [self.read(name, env, node) for name in node.inputs]
        key = tuple(len(v.items) for v in values if isinstance(v, SEQUENCES))
        variant = next((v for v in self.by_sub[node.index] if v.key == key), None)
        if variant is None or variant.ranked:
            raise NotLowerable(f"{node.name}: no variant for list lengths {key} known when it is lowered")
        made = self.compiled[variant.name]
        if made.guards or made.alternatives:
            raise NotLowerable(f"{node.name}: its graph has shape guards or graphs for other sizes")
        if any(not layout.is_port for layout in (*variant.output_layouts,)):
            raise NotLowerable(f"{node.name}: it returns a structure")
        flat = [item for v in values for item in (v.items if isinstance(v, SEQUENCES) else [v])]
        if len(flat) != len(variant.inputs) or any(
                (layout.is_tensor_list, layout.is_port) != (isinstance(v, SEQUENCES), not isinstance(v, SEQUENCES))
                for v, layout in zip(values, variant.input_layouts)):
            raise NotLowerable(f"{node.name}: an input that is a structure")
        feeds = {port.name: self.feed(value, port, node) for port, value in zip(variant.inputs, flat)}
        if made.file not in self.models:
            self.models[made.file] = onnx.load_from_string(made.data)
        outputs = scope.inline(self.models[made.file], made.file, feeds)
        self.inlined += 1
        for name, port in zip(node.outputs, variant.outputs):
            elem = ELEM.get(port.dtype)
            if elem is None:
                raise NotLowerable(f"{node.name}: an output of dtype {port.dtype}")
            value = outputs[port.name]
            env[name] = Tensor(value, elem) if port.kind == "tensor" else Number(value, elem, port.kind)

    def feed(self, value: Value, port: Port, node: SubDNN) -> str:
        elem = ELEM.get(port.dtype)
        if isinstance(value, Tensor) and port.kind == "tensor" and value.elem == elem:
            return value.name
        if port.kind != "tensor" and elem is not None:
            if isinstance(value, Static) and python_kind(value.value) is not None:
                return self.constant_as(value.value, port.dtype)
            if isinstance(value, Number) and value.elem == elem:
                return value.name
        raise NotLowerable(f"{node.name}: its input {port.name} is {describe(value)}, not what its graph takes")


    def host_op(self, node: HostOp, env: dict[str, Value], scope: GraphBuilder) -> None:
        statement = node.statement.body[0] if len(node.statement.body) == 1 else None
        if isinstance(statement, cst.Assign) and len(statement.targets) == 1 and isinstance(
                statement.targets[0].target, cst.Name):
            target = statement.targets[0].target.value
            env[target] = self.value(statement.value, env, scope, node)
            return
        if isinstance(statement, cst.AugAssign) and isinstance(statement.target, cst.Name):
            target = statement.target.value
            binary = cst.BinaryOperation(statement.target, _BINARY_OF_AUG.get(type(statement.operator),
                                                                              cst.BitOr)(), statement.value)
            env[target] = self.value(binary, env, scope, node)
            return
        if isinstance(statement, cst.Expr) and isinstance(statement.value, cst.Call):
            call = statement.value
            if (isinstance(call.func, cst.Attribute) and call.func.attr.value == "append" and len(call.args) == 1
                    and isinstance(call.func.value, cst.Name) and call.args[0].keyword is None
                    and not call.args[0].star):
                target = self.read(call.func.value.value, env, node)
                if isinstance(target, ListValue):
                    target.items.append(self.value(call.args[0].value, env, scope, node))
                    return
        raise NotLowerable(f"the host statement `{source(node.statement)}` ({location_of(node)})")

    # -- expressions ----------------------------------------------------------------------------

    # -- returns --------------------------------------------------------------------------------

    def returned(self, node: Return | None, env: dict[str, Value], scope: GraphBuilder) -> _Result:
        number = len(self.returns)
        if node is None:
            node = _implicit_return()
        self.returns[number] = node
        slots: list[tuple[str, int]] = []
        tree = self.tree(node.value, env, scope, slots, node)
        return _Result(slots, {number: tree}, scope.constant(np.array(number, np.int64)), vector(env, scope))

    def tree(self, expr: cst.BaseExpression, env: dict[str, Value], scope: GraphBuilder,
             slots: list[tuple[str, int]], where: Any) -> Any:
        if isinstance(expr, (cst.Tuple, cst.List)):
            kind = "tuple" if isinstance(expr, cst.Tuple) else "list"
            if any(isinstance(e, cst.StarredElement) for e in expr.elements):
                raise NotLowerable(f"a starred return `{source(expr)}`")
            return (kind, [self.tree(e.value, env, scope, slots, where) for e in expr.elements])
        return self.leaf(self.value(expr, env, scope, where), slots)

    def leaf(self, value: Value, slots: list[tuple[str, int]]) -> Any:
        if isinstance(value, SEQUENCES):
            kind = "list" if isinstance(value, ListValue) else "tuple"
            return (kind, [self.leaf(item, slots) for item in value.items])
        if isinstance(value, Static):
            literal = value.value
            if not (literal is None or isinstance(literal, str) or (python_kind(literal) is not None
                                                                   and not odd_float(literal))):
                raise NotLowerable(f"the returned value {literal!r}")
            return ("static", literal)
        if isinstance(value, (Tensor, Number)):
            slots.append((value.name, value.elem))
            return ("slot", len(slots) - 1, value.kind if isinstance(value, Number) else None)
        raise NotLowerable(f"a returned {describe(value)}")


def lower(graph: HCFG, inputs: Sequence[Port], variants: Sequence[Variant],
          compiled: Mapping[str, CompiledVariant], output_names: Callable[[int], list[str]]) -> Lowered:
    """``graph`` as one ONNX model over its tensor ``inputs``, or ``NotLowerable``; its outputs are
    named ``output_names(slots)`` (the slots', then the path number's and the conditions' outcomes')."""
    scope = GraphBuilder()
    walker = _Walk(graph, variants, compiled, scope)
    env: dict[str, Value] = {KEY: walker.numbering.initial()}
    infos = []
    by_name = {port.name: port for port in inputs}
    for name in graph.parameters:
        port = by_name.get(name)
        if port is None or port.kind != "tensor" or port.dtype not in ELEM:
            raise NotLowerable(f"the input '{name}' is not a tensor the graph can take")
        env[name] = Tensor(scope.reserve(name), ELEM[port.dtype])
        infos.append(helper.make_tensor_value_info(name, ELEM[port.dtype], list(port.shape)))
    try:
        result = walker.terminal(graph.body, env, scope)
        model = scope.model(infos, [*(s[0] for s in result.slots), result.path, result.decisions],
                            output_names(len(result.slots)),
                            [*(s[1] for s in result.slots), TensorProto.INT64, TensorProto.INT64],
                            f"{graph.name}_single_graph")
    except ComposeError as error:
        raise NotLowerable(str(error)) from error
    paths = [(walker.returns[number], result.trees[number]) for number in sorted(result.trees)]
    data = model.SerializeToString()
    return Lowered(data, [elem for _, elem in result.slots], paths,
                   {"paths": len(paths), "inlined": walker.inlined, "nodes": len(model.graph.node)},
                   walker.numbering.count)


# -- helpers ------------------------------------------------------------------------------------

_BINARY_OF_AUG = {cst.AddAssign: cst.Add, cst.SubtractAssign: cst.Subtract, cst.MultiplyAssign: cst.Multiply}


def _may_return(node: Cond) -> bool:
    return any(isinstance(n, Return) for n in walk(node.then + node.orelse))


def _remap(tree: Any, mapping: list[int]) -> Any:
    if tree[0] == "slot":
        return ("slot", mapping[tree[1]], tree[2])
    if tree[0] in ("tuple", "list"):
        return (tree[0], [_remap(child, mapping) for child in tree[1]])
    return tree


def _empty(scope: GraphBuilder, elem: int) -> str:
    """A stand-in for a slot the path taken does not fill (never read: the host reads its path's slots)."""
    return scope.constant(np.zeros((0,), helper.tensor_dtype_to_np_dtype(elem)))


def _constant(scope: GraphBuilder, value: Any, elem: int) -> str:
    return scope.constant(np.array(value, helper.tensor_dtype_to_np_dtype(elem)))


def _implicit_return() -> Return:
    statement = cst.parse_statement("return None")
    return Return(statement, statement.body[0].value)




__all__ = ["Lowered", "NotLowerable", "lower"]
