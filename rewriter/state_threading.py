"""Thread module state through the rewritten function, as ``torch.export`` functionalizes buffer mutation.

Assumes: ``body`` is the flat, loop-free body the pipeline produced, in which module
state is reached by attribute (and literal index) chains from the receiver
(``self.count``, ``self.inner.ema``, ``self.blocks[0].n``), and ``table`` holds every
slot some method may write (``rewriter.state_slots``).

Guarantees: every chain that denotes a slot is replaced by a local name, which is a
new parameter of the function (its value when the call starts) and whose final value
is returned: every ``return v`` becomes ``return v, (s0, s1, ...)`` (a path that
falls off the end returns ``None, (...)``). A tensor slot is cloned right before
each statement that may write it in place, so the write changes a local copy only
(a write through another name is refused by ``hcfg.aliasing``, except a plain alias
bound once, which is renamed to the slot); ``s.copy_(v)`` and ``out=s`` become
rebindings; a rebinding (``self.buf = t``, ``self.steps += 1``) rebinds the local.
A list slot (only appended to: ``self.history.append(v)``) is no parameter: the function
starts a fresh local list and returns the items it appended; any other use of it is refused.
The function no longer reads or writes those slots on the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import libcst as cst
import torch
from dycl.rewriter.context import RewriteContext
from dycl.rewriter.names import Namespace
from dycl.rewriter.state_table import StateSlot, StateTable

_MISSING = object()


@dataclass(frozen=True)
class ThreadedState:
    """One slot threaded through the function: its ``parameter`` and ``path`` from the model (``inner.ema``)."""

    parameter: str
    path: str
    slot: StateSlot

    @property
    def kind(self) -> str:
        return self.slot.kind


class _ReplaceSlots(cst.CSTTransformer):
    """Replaces chains that denote a slot by the slot's local name (made on first use)."""

    def __init__(self, receiver: str, model: torch.nn.Module, table: StateTable, namespace: Namespace) -> None:
        super().__init__()
        self.receiver, self.model, self.table, self.namespace = receiver, model, table, namespace
        self.names: dict[tuple[int, str], tuple[str, StateSlot]] = {}

    def _object(self, node: cst.BaseExpression) -> Any:
        if isinstance(node, cst.Name):
            return self.model if node.value == self.receiver else _MISSING
        if isinstance(node, cst.Attribute):
            base = self._object(node.value)
            return _MISSING if base is _MISSING else getattr(base, node.attr.value, _MISSING)
        if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            base, key = self._object(node.value), node.slice[0].slice.value
            if base is _MISSING or not isinstance(key, (cst.Integer, cst.SimpleString)):
                return _MISSING
            try:
                return base[key.evaluated_value]
            except Exception:  # noqa: BLE001 - not a literal index into a module container
                return _MISSING
        return _MISSING

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        owner = self._object(original.value)
        slot = None if owner is _MISSING else self.table.get(owner, original.attr.value)
        if slot is None:
            return updated
        if slot.key not in self.names:
            self.names[slot.key] = (self.namespace.fresh(f"state_{slot.attribute}"), slot)
        return cst.Name(self.names[slot.key][0])


class _OpaqueReaders(cst.CSTVisitor):
    """Finds a call kept as a call (traced into a sub-DNN) of a module holding a threaded slot: the
    traced graph would read the slot's value at compile time."""

    def __init__(self, replacer: _ReplaceSlots, owners: dict[int, StateSlot]) -> None:
        super().__init__()
        self.replacer, self.owners = replacer, owners
        self.statement: cst.CSTNode | None = None
        self.found: tuple[cst.CSTNode, torch.nn.Module, StateSlot] | None = None

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.statement = node

    def visit_If(self, node: cst.If) -> None:
        self.statement = node

    def visit_Call(self, node: cst.Call) -> None:
        called = self.replacer._object(node.func)
        module = getattr(called, "__self__", called)
        if self.found is None and isinstance(module, torch.nn.Module):
            for inner in module.modules():
                if id(inner) in self.owners:
                    self.found = (self.statement, module, self.owners[id(inner)])
                    return


class _ReturnState(cst.CSTTransformer):
    """``return v`` → ``return v, (s0, ...)``."""

    def __init__(self, names: list[str]) -> None:
        super().__init__()
        self.state = "(" + "".join(f"{name}, " for name in names) + ")"

    def leave_Return(self, original: cst.Return, updated: cst.Return) -> cst.Return:
        value = "None" if updated.value is None else cst.Module([]).code_for_node(updated.value)
        return updated.with_changes(value=cst.parse_expression(f"(({value}), {self.state})"),
                                    whitespace_after_return=cst.SimpleWhitespace(" "))


def _always_returns(body: list[cst.BaseStatement]) -> bool:
    if not body:
        return False
    last = body[-1]
    if isinstance(last, cst.SimpleStatementLine):
        return any(isinstance(small, (cst.Return, cst.Raise)) for small in last.body)
    if isinstance(last, cst.If):
        orelse = last.orelse
        if orelse is None:
            return False
        rest = [orelse] if isinstance(orelse, cst.If) else list(orelse.body.body)
        return _always_returns(list(last.body.body)) and _always_returns(rest)
    return False


def _path(model: torch.nn.Module, slot: StateSlot) -> str:
    for name, module in model.named_modules(remove_duplicate=False):
        if module is slot.module:
            return f"{name}.{slot.attribute}" if name else slot.attribute
    raise AssertionError(f"state slot {slot.attribute!r} on a module outside the model (a dycl bug)")


def thread_state(ctx: RewriteContext, body: list[cst.BaseStatement],
                 receiver: str) -> tuple[list[cst.BaseStatement], tuple[ThreadedState, ...]]:
    """``body`` with the slots it uses threaded (see the module docstring), and those slots in parameter order."""
    model, table = ctx.model, ctx.state
    if not table.slots:
        return body, ()
    replacer = _ReplaceSlots(receiver, model, table, ctx.namespace)
    body = [statement.visit(replacer) for statement in body]
    if not replacer.names:
        return body, ()
    readers = _OpaqueReaders(replacer, {slot.module_id: slot for _, slot in replacer.names.values()})
    for statement in body:
        statement.visit(readers)
    if readers.found is not None:
        statement, module, slot = readers.found
        raise ctx.error(f"module state {slot.attribute!r} written in forward() and read inside the module "
                        f"{type(module).__name__} it belongs to, whose call is compiled as one graph",
                        statement, "write that state outside the compiled model, or keep it on a module "
                        "whose forward() dycl rewrites (user code)")
    threaded = tuple(ThreadedState(name, _path(model, slot), slot) for name, slot in replacer.names.values())
    lists = {state.parameter: state for state in threaded if state.kind == "list"}
    _refuse_list_reads(ctx, body, lists)
    names = [state.parameter for state in threaded]
    body = [statement.visit(_ReturnState(names)) for statement in body]
    if not _always_returns(body):
        body.append(cst.SimpleStatementLine([cst.Return(cst.parse_expression(
            "(None, (" + "".join(f"{name}, " for name in names) + "))"))]))
    tensors = frozenset(state.parameter for state in threaded if state.kind == "tensor")
    body = _functional_writes(_aliases_replaced(body, tensors), tensors)
    fresh_lists = [cst.parse_statement(f"{name} = []\n") for name in lists]  # the items this call appends
    return fresh_lists + _cloned_before_writes(body, tensors), threaded


def _refuse_list_reads(ctx: RewriteContext, body: list[cst.BaseStatement], lists: dict[str, ThreadedState]) -> None:
    """A list slot may only be appended to (``self.history.append(v)`` on a line of its own): any
    other use reads a list whose length grows with every call, which no compiled path can hold."""
    if not lists:
        return
    finder = _ListUses(frozenset(lists))
    for statement in body:
        statement.visit(finder)
    if finder.found is not None:
        statement, name = finder.found
        raise ctx.error(f"a read of the list {lists[name].path} on the model, which forward() appends to",
                        statement, "only appending to a list on self is compiled (its length grows with every "
                        "call); keep what forward() reads in a tensor buffer or a local list")


class _ListUses(cst.CSTVisitor):
    def __init__(self, lists: frozenset[str]) -> None:
        super().__init__()
        self.lists = lists
        self.allowed: set[int] = set()
        self.statement: cst.CSTNode | None = None
        self.found: tuple[cst.CSTNode, str] | None = None

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.statement = node

    def visit_If(self, node: cst.If) -> None:
        self.statement = node

    def visit_Expr(self, node: cst.Expr) -> None:
        call = node.value
        if (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "append"
                and isinstance(call.func.value, cst.Name) and len(call.args) == 1):
            self.allowed.add(id(call.func.value))

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.lists and id(node) not in self.allowed and self.found is None:
            self.found = (self.statement, node.value)


# Note: why ``s.copy_(v)`` and ``f(..., out=s)`` become assignments.
# Exporters translate neither (TorchScript has no ONNX ``aten::copy``; ``out=`` on a graph value is
# not traceable); as statements of their own they are rebindings of the slot with the same value.
def _functional_writes(body: list[cst.BaseStatement], tensors: frozenset[str]) -> list[cst.BaseStatement]:
    if not tensors:
        return body
    return [statement.visit(_Functional(tensors)) for statement in body]


class _Functional(cst.CSTTransformer):
    def __init__(self, tensors: frozenset[str]) -> None:
        super().__init__()
        self.tensors = tensors

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine,
                                  updated: cst.SimpleStatementLine) -> cst.BaseStatement:
        if len(updated.body) != 1:
            return updated
        small = updated.body[0]
        call = small.value if isinstance(small, (cst.Expr, cst.Assign)) else None
        if not isinstance(call, cst.Call):
            return updated
        text = self._rewritten(call)
        if text is None:
            return updated
        if isinstance(small, cst.Assign):
            targets = " = ".join(cst.Module([]).code_for_node(t.target) for t in small.targets)
            text = f"{text}; {targets} = {self._slot}"
        return cst.parse_statement(text + "\n").with_changes(trailing_whitespace=updated.trailing_whitespace)

    def _rewritten(self, call: cst.Call) -> str | None:
        code = cst.Module([]).code_for_node
        func = call.func
        positional = [a for a in call.args if a.keyword is None and not a.star]
        if (isinstance(func, cst.Attribute) and func.attr.value == "copy_" and isinstance(func.value, cst.Name)
                and func.value.value in self.tensors and len(call.args) == 1 and positional):
            self._slot = slot = func.value.value
            return f"{slot} = ({code(positional[0].value)}).to({slot}.dtype).expand_as({slot}).clone()"
        out = [a for a in call.args if a.keyword is not None and a.keyword.value == "out"]
        if len(out) == 1 and isinstance(out[0].value, cst.Name) and out[0].value.value in self.tensors:
            self._slot = slot = out[0].value.value
            rest = [a for a in call.args if a is not out[0]]
            if rest:
                rest[-1] = rest[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            return f"{slot} = ({code(call.with_changes(args=rest))}).to({slot}.dtype)"
        return None


# Note: why an alias of a tensor slot is replaced by the slot's name.
# ``buf = self.running; buf.mul_(m)`` writes the module's buffer through ``buf``. Threaded, the
# write must reach the slot's local: where ``buf`` is bound once, to the slot, and the slot is
# never rebound, every ``buf`` is the slot's tensor, so the name can stand for it. Any other alias
# (bound on one path only, or to a view) is left, and ``hcfg.aliasing`` refuses its in-place update.
def _aliases_replaced(body: list[cst.BaseStatement], tensors: frozenset[str]) -> list[cst.BaseStatement]:
    counter = _BindingCounter()
    for statement in body:
        statement.visit(counter)
    aliases = {alias: slot for alias, slot in counter.aliases.items()
               if counter.bindings.get(alias) == 1 and slot in tensors and counter.bindings.get(slot, 0) == 0}
    if not aliases:
        return body
    renamer = _RenameAliases(aliases)
    return [statement.visit(renamer) for statement in body]


class _BindingCounter(cst.CSTVisitor):
    """How often each name is bound, and the names bound (somewhere) to a plain name: ``a = b``."""

    def __init__(self) -> None:
        super().__init__()
        self.bindings: dict[str, int] = {}
        self.aliases: dict[str, str] = {}

    def _bound(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self.bindings[target.value] = self.bindings.get(target.value, 0) + 1
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bound(element.value)
        elif isinstance(target, cst.StarredElement):
            self._bound(target.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._bound(target.target)
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) and isinstance(
                node.value, cst.Name):
            self.aliases[node.targets[0].target.value] = node.value.value

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bound(node.target)

    # ``t += v`` on a tensor writes it in place: not a binding (names of other values are not aliases here)


class _RenameAliases(cst.CSTTransformer):
    """Drops ``alias = slot`` and names the slot wherever the alias was named."""

    def __init__(self, aliases: dict[str, str]) -> None:
        super().__init__()
        self.aliases = aliases

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        return updated.with_changes(value=self.aliases.get(updated.value, updated.value))

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)  # ``x.buf``: an attribute name, not the alias

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)  # ``f(buf=...)``: a keyword, not the alias

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine,
                                  updated: cst.SimpleStatementLine) -> cst.BaseStatement:
        kept = [small for small in updated.body if not (
            isinstance(small, cst.Assign) and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name) and isinstance(small.value, cst.Name)
            and small.targets[0].target.value == small.value.value)]
        return updated.with_changes(body=kept or [cst.Pass()])


# Note: why a tensor slot is cloned right before each statement that writes it in place.
# The slot's value is an input of the sub-DNN holding the write; an exporter told to mutate a
# graph input drops the mutation (TorchScript: "removing mutation ... on block input"). A clone
# in the same statement run makes the write one on a fresh local, in the same sub-DNN.
def _cloned_before_writes(body: list[cst.BaseStatement], tensors: frozenset[str]) -> list[cst.BaseStatement]:
    if not tensors:
        return body
    result: list[cst.BaseStatement] = []
    for statement in body:
        if isinstance(statement, cst.If):
            statement = statement.visit(_CloneInBlocks(tensors))
        elif isinstance(statement, cst.SimpleStatementLine):
            for name in sorted(_written_in_place(statement, tensors)):
                result.append(cst.SimpleStatementLine(
                    [cst.Assign([cst.AssignTarget(cst.Name(name))], cst.parse_expression(f"{name}.clone()"))],
                    trailing_whitespace=statement.trailing_whitespace))
        result.append(statement)
    return result


class _CloneInBlocks(cst.CSTTransformer):
    def __init__(self, tensors: frozenset[str]) -> None:
        super().__init__()
        self.tensors = tensors

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        return updated.with_changes(body=_cloned_before_writes(list(updated.body), self.tensors))


def _root(node: cst.BaseExpression) -> str | None:
    while isinstance(node, (cst.Attribute, cst.Subscript, cst.Call)):
        node = node.func if isinstance(node, cst.Call) else node.value
    return node.value if isinstance(node, cst.Name) else None


def _in_place_name(name: str) -> bool:
    return (name.startswith("__i") and name.endswith("__")) or (name.endswith("_") and not name.endswith("__"))


def _written_in_place(statement: cst.SimpleStatementLine, names: frozenset[str]) -> set[str]:
    """The names of ``names`` whose tensor ``statement`` may change in place."""
    found: set[str] = set()

    class Finder(cst.CSTVisitor):
        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            found.add(_root(node.target))

        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            if isinstance(node.target, (cst.Subscript, cst.Attribute)):
                found.add(_root(node.target))

        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if isinstance(func, cst.Attribute) and _in_place_name(func.attr.value):
                found.add(_root(func.value))
            positional = [a.value for a in node.args if a.keyword is None and not a.star]
            called = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(
                func, cst.Name) else ""
            inplace = any(a.keyword is not None and a.keyword.value == "inplace" for a in node.args)
            if positional and (_in_place_name(called) or inplace):
                found.add(_root(positional[0]))
            found.update(_root(a.value) for a in node.args if a.keyword is not None and a.keyword.value == "out")

    statement.visit(Finder())
    return {name for name in found if name in names}


__all__ = ["ThreadedState", "thread_state"]
