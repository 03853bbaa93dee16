"""If-conversion (predication) of per-sample conditions (``per_sample=True``): a
condition whose two branches are side-effect-free sub-DNNs ending in ``return``
becomes one sub-DNN that runs both branches on every sample of the group and
selects each sample's row by its own test, so the router (``hostgen/host_router.py``)
makes one run where it made one per branch, and the runtime fuses across the old
boundaries.

A *predicable region* is a sub-DNN ``A``, the ``Cond`` right after it, whose test is a
name ``A`` writes, and the rest of the block: one branch returns, the other goes on with
the rest (an early exit: ``if conf >= t: return out``), or both return; each branch,
with the rest where it goes on, must be sub-DNNs only ending in ``return <name>``.
Regions are converted from the last one of a block and inside branches first, so an
early-exit chain becomes one sub-DNN. The region becomes::

    <A's statements>
    <then-branch statements, every name they write renamed>
    <else-branch statements, likewise>
    selected = then_value.where(test, else_value)
    return selected

A condition whose branches both go on (a gate, ``if g.item() > 0.5: x = x + block(x)``) is
converted by ``dycl.per_sample.rejoin`` into a sub-DNN of its own, folded with the sub-DNNs
around it (inner conditions first, so a gate inside an early exit's branch converts before it).

Assumes ``graph`` is annotated (sub-DNN ports from liveness) and ``produced`` holds
the build walk's values (``hcfg.build.Built.produced``); per-sample compiles refuse
module state written in ``forward`` and inputs updated in place (``dycl.per_sample.mode``).

Guarantees, checked here (a region that fails one keeps routing): the test is a
one-element bool tensor; every branch statement assigns plain names (no subscript
or attribute target, no in-place method such as ``x.add_()`` or ``out=``, no
lambda, comprehension or walrus whose scopes a rename could misread), so a branch
writes no value the other reads (an update hidden in a submodule or helper,
``nn.ReLU(inplace=True)`` on a named tensor, is refused by the build walk:
``hcfg.aliasing.check_seen_updates``); both returned values are tensors of one shape
and dtype on the build's run, and no dim is symbolic (the caller converts only graphs
compiled with every dim static). What can only be
seen in the exported graph (an op that may fail on another sample's data: a
``Gather`` with data indices, an integer ``Div``) is checked after export by
``dycl.per_sample.predicable_onnx``, which refuses the compile so that it starts
again routing. Each sample's row then equals the branch its test picks.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import libcst as cst
import torch

from dycl.hcfg.annotate import annotate
from dycl.hcfg.graph import HCFG, Block, Cond, HostOp, Node, Return, SubDNN, always_returns, walk
from dycl.hcfg.liveness import Liveness
from dycl.hcfg.merge_renames import merge_across_renames
from dycl.hcfg.passes import graph_pass
from dycl.per_sample.rejoin import convert, merge_adjacent
from dycl.per_sample.value_flow import Known, values_at_conditions
from dycl.rewriter.walk import bound_names

#: the generated names of selected values start with this (``is_predicated`` reads it)
SELECTED = "_dycl_selected"
#: the test of a rejoining condition (``dycl.per_sample.rejoin``) is bound to a name starting with this
GATE = f"{SELECTED}_gate"
_SCOPES = (cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp, cst.NamedExpr, cst.Yield,
           cst.Await)


@graph_pass
def if_convert(graph: HCFG, produced: Mapping[int, Mapping[str, Any]], built: Block | None = None
               ) -> tuple[HCFG, int]:
    """``graph`` with every predicable region converted, and how many conditions were; ``built``
    is the build's body, whose sub-DNNs ``produced`` describes (default: ``graph``'s)."""
    host_written = {name for node in walk(graph.body) if isinstance(node, HostOp)
                    for name in bound_names(node.statement)} | set(graph.parameters)
    examples = {index: dict(values) for index, values in produced.items()}
    liveness = Liveness.of(graph.body, graph.locals)
    nodes = [node for node in walk(graph.body) if isinstance(node, SubDNN | Cond)]
    known = Known.of(graph.body if built is None else built, produced)
    converter = _Converter(examples, _Names(_all_names(graph.body) | set(graph.locals)), frozenset(host_written),
                           known, values_at_conditions(graph.body, known),
                           {id(n): liveness.live_after(n) for n in nodes if isinstance(n, Cond)},
                           max((n.index for n in nodes), default=0) + 1)
    body = converter.block(graph.body)
    if not converter.converted:
        return graph, 0
    converted = annotate(replace(graph, body=body, locals=graph.locals | converter.names.made))
    return merge_across_renames(converted), converter.converted


def rejoined_gates(sub: SubDNN) -> int:
    """How many rejoining conditions ``sub`` holds converted (``dycl.per_sample.rejoin``)."""
    return sum(name.startswith(GATE) for statement in sub.statements for name in bound_names(statement))


def is_predicated(sub: SubDNN) -> bool:
    """Whether ``sub`` holds a converted region (``if_convert``'s selection)."""
    return any(name.startswith(SELECTED) for statement in sub.statements for name in bound_names(statement))


@dataclass
class _Names:
    """Fresh names that shadow nothing the function reads or writes."""

    taken: set[str]
    made: frozenset[str] = frozenset()

    def fresh(self, base: str) -> str:
        name = self.peek(base)
        self.taken.add(name)
        self.made = self.made | {name}
        return name

    def peek(self, base: str) -> str:
        """The name ``fresh`` would give next, not taken."""
        return next(name for number in itertools.count(1) if (name := f"{base}_{number}") not in self.taken)


@dataclass
class _Branch:
    statements: list[cst.SimpleStatementLine]
    value: str  # the renamed returned name
    example: Any


@dataclass
class _Converter:
    examples: dict[int, dict[str, Any]]
    names: _Names
    host_written: frozenset[str]  # and the parameters: names whose value a sub-DNN's example may not show
    known: Known  # the build's values by statement (value_flow)
    values: dict[int, dict[str, Any]]  # each condition's known tensors before it (value_flow), by id
    live: dict[int, frozenset[str]]  # each condition's names live after it, by id
    next_index: int  # the index of the next sub-DNN a rejoining condition becomes
    converted: int = 0
    rejoined: set[int] = field(default_factory=set)  # the indices of those sub-DNNs

    def block(self, nodes: Block) -> Block:
        """``nodes`` with their regions converted, from the last: a ``Cond`` one of whose
        branches returns continues, on its other branch, with the nodes after it."""
        rest: list[Node] = []
        for node in reversed(nodes):
            if isinstance(node, Cond):
                original = node
                node = replace(node, then=self.block(node.then), orelse=self.block(node.orelse))
                node = self.rejoin(original, node)
            if isinstance(node, SubDNN) and rest and isinstance(rest[0], Cond):
                merged = self.region(node, rest[0], tuple(rest[1:]))
                if merged is not None:
                    rest = merged
                    continue
            rest.insert(0, node)
        return self.merge(tuple(rest))

    def rejoin(self, original: Cond, cond: Cond) -> Node:
        """``cond`` as one sub-DNN where its branches rejoin and convert (``dycl.per_sample.rejoin``)."""
        selected = self.names.peek(GATE)
        made = convert(cond, self.values.get(id(original), {}), self.live.get(id(original), frozenset()),
                       self.next_index, selected, self.known, self._renamed)
        if made is None:
            return cond
        self.names.fresh(GATE)
        self.known.made[made.sub.index] = made.examples
        self.rejoined.add(made.sub.index)
        self.next_index += 1
        self.converted += 1
        return made.sub

    def merge(self, nodes: Block) -> Block:
        """Runs of sub-DNNs with a rejoined one among them, folded (``rejoin.merge_adjacent``)."""
        if not any(isinstance(node, SubDNN) and node.index in self.rejoined for node in nodes):
            return nodes
        return merge_adjacent(nodes, {}, self.known, self.rejoined)

    def _renamed(self, statements: list[cst.SimpleStatementLine]):
        if not all(_plain(statement) for statement in statements):
            return None
        renaming = _Renaming(self.names)
        return [renaming.statement(statement) for statement in statements], renaming.read

    def region(self, producer: SubDNN, cond: Cond, after: Block) -> list[Node] | None:
        test = cond.test
        if not isinstance(test, cst.Name) or not _one_bool(self.examples.get(producer.index, {}).get(test.value)):
            return None
        falls = [not always_returns(block) for block in (cond.then, cond.orelse)]
        if all(falls):  # both would go on with ``after``: it would run twice
            return None
        then = self.branch(cond.then + after if falls[0] else cond.then)
        orelse = self.branch(cond.orelse + after if falls[1] else cond.orelse)
        if then is None or orelse is None or not _same_kind(then.example, orelse.example):
            return None
        selected = self.names.fresh(SELECTED)
        select = cst.parse_statement(f"{selected} = {then.value}.where({test.value}, {orelse.value})")
        select = select.with_changes(trailing_whitespace=cond.statement.body.header)
        statements = producer.statements + tuple(then.statements) + tuple(orelse.statements) + (select,)
        merged = replace(producer, statements=statements)
        self.examples.setdefault(producer.index, {})[selected] = then.example
        returned = cst.parse_statement(f"return {selected}")
        self.converted += 1
        return [merged, Return(returned.with_changes(trailing_whitespace=select.trailing_whitespace),
                               cst.Name(selected))]

    def branch(self, block: Block) -> _Branch | None:
        """The branch's statements renamed, its returned name and its example; None where
        the branch is not sub-DNNs ending in ``return <name>`` or a statement is not plain."""
        if not block or not isinstance(block[-1], Return) or not isinstance(block[-1].value, cst.Name):
            return None
        subs = block[:-1]
        if not all(isinstance(node, SubDNN) for node in subs):
            return None
        statements = [s for sub in subs for s in sub.statements]  # type: ignore[union-attr]
        if not all(_plain(statement) for statement in statements):
            return None
        returned = block[-1].value.value
        renamed = _Renaming(self.names)
        body = [renamed.statement(statement) for statement in statements]
        return _Branch(body, renamed.read(returned), self._example(subs, returned))

    def _example(self, subs: Block, name: str) -> Any:
        """The value ``name`` has at the branch's ``return`` on the build's run: the branch's last
        write of it, or, where the branch does not write it, every sub-DNN's write of it where all
        agree in kind (None where the host writes it or it is a parameter: not proven)."""
        for sub in reversed(subs):
            if name in {n for s in sub.statements for n in bound_names(s)}:  # type: ignore[union-attr]
                return self.examples.get(sub.index, {}).get(name)  # type: ignore[union-attr]
        if name in self.host_written:
            return None
        writes = [values[name] for values in self.examples.values() if name in values]
        return writes[0] if writes and all(_same_kind(writes[0], other) for other in writes) else None


class _Renaming(cst.CSTTransformer):
    """One branch in its own names: each name it writes gets a fresh name from its write on,
    so that neither branch sees the other's writes and the names after the region keep their
    values; what it reads before writing it keeps its name."""

    def __init__(self, names: _Names) -> None:
        self.names = names
        self.current: dict[str, str] = {}

    def read(self, name: str) -> str:
        return self.current.get(name, name)

    def statement(self, line: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        assign = line.body[0]
        assert isinstance(assign, cst.Assign)
        value = assign.value.visit(self)
        written = {n.value for target in assign.targets for n in _target_names(target.target)}
        self.current.update({name: self.names.fresh(name) for name in sorted(written)})
        targets = [target.visit(self) for target in assign.targets]
        return line.with_changes(body=[assign.with_changes(targets=targets, value=value)])

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        return updated.with_changes(value=self.read(updated.value))

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)  # x.weight: "weight" is no variable

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)  # f(dim=1): "dim" is no variable


def _target_names(target: cst.BaseExpression) -> list[cst.Name]:
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, cst.Tuple | cst.List):
        return [n for element in target.elements for n in _target_names(element.value)]
    raise ValueError("not a plain target")


def _plain(line: cst.SimpleStatementLine) -> bool:
    """An assignment to names whose value writes nothing a rename or a clone could miss."""
    if len(line.body) != 1 or not isinstance(line.body[0], cst.Assign):
        return False
    assign = line.body[0]
    try:
        for target in assign.targets:
            _target_names(target.target)
    except ValueError:
        return False
    for node in _descendants(assign.value):
        if isinstance(node, (_SCOPES, cst.StarredElement)):
            return False
        if isinstance(node, cst.Call) and _writes(node):
            return False
    return True


def _writes(call: cst.Call) -> bool:
    func = call.func
    name = func.attr.value if isinstance(func, cst.Attribute) else ""
    in_place = name.endswith("_") and not name.startswith("__")
    return in_place or any(arg.keyword is not None and arg.keyword.value == "out" for arg in call.args)


def _descendants(node: cst.CSTNode):
    yield node
    for child in node.children:
        yield from _descendants(child)


def _all_names(block: Block) -> set[str]:
    names: set[str] = set()
    for node in block:
        statements = (node.statements if isinstance(node, SubDNN) else
                      (node.statement,) if not isinstance(node, Cond) else (node.statement,))
        for statement in statements:
            names |= {n.value for n in _descendants(statement) if isinstance(n, cst.Name)}
    return names


def _one_bool(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.dtype == torch.bool and value.numel() == 1 and value.dim() == 0


def _same_kind(a: Any, b: Any) -> bool:
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
            and a.dtype == b.dtype and not isinstance(a, torch.nn.Parameter))


__all__ = ["GATE", "SELECTED", "if_convert", "is_predicated", "rejoined_gates"]
