"""Thread module state through the rewritten function, as ``torch.export`` functionalizes buffer mutation.

Assumes: ``body`` is the flat, loop-free body the pipeline produced, in which module
state is reached by attribute (and literal index) chains from the receiver
(``self.count``, ``self.inner.ema``, ``self.blocks[0].n``), and ``table`` holds every
slot some method may write (``rewriter.state_slots``).

Guarantees: every chain that denotes a slot is replaced by a local name, which is a
new parameter of the function (its value when the call starts) and whose final value
is returned: every ``return v`` becomes ``return v, (s0, s1, ...)`` (a path that
falls off the end returns ``None, (...)``). A write to a tensor slot changes a local
copy only (``rewriter.state_locals``: clones before in-place writes, aliases renamed,
``copy_``/``out=`` as rebindings); a rebinding (``self.buf = t``, ``self.steps += 1``)
rebinds the local.
A list slot (appended to: ``self.history.append(v)``) is no parameter: the function
starts a fresh local list and returns the items it appended; where it reads the list's
``len()``, the length at the call's start is a parameter (a ``length`` slot after the
others: ``rewriter.state_lists``), counted up at each append, and where it reads items,
the items at the call's start are one (a ``prior`` slot); any other use
of it is refused, as is a call kept as one graph of a module that holds a threaded slot (the graph would read
the slot's value at compile time), and a read of a property whose getter may read a slot
(``rewriter.state_properties``: the getter runs nowhere in the compiled model). The function no
longer reads or writes those slots on the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import libcst as cst
import torch
from dycl.rewriter.context import RewriteContext
from dycl.rewriter.names import Namespace
from dycl.rewriter.opaque_reads import graph_may_read
from dycl.rewriter.state_lists import thread_lists
from dycl.rewriter.state_locals import local_writes
from dycl.rewriter.state_properties import LiteralGetattr, attribute_may_read_state
from dycl.rewriter.state_table import StateSlot, StateTable

MISSING = object()


def object_at(node: cst.BaseExpression, receiver: str, model: torch.nn.Module) -> Any:
    """The object a chain from ``receiver`` (the model) denotes: ``self.blocks[0].norm`` (attributes,
    literal indices); ``MISSING`` where the chain has another root or cannot be followed."""
    if isinstance(node, cst.Name):
        return model if node.value == receiver else MISSING
    if isinstance(node, cst.Attribute):
        base = object_at(node.value, receiver, model)
        return MISSING if base is MISSING else getattr(base, node.attr.value, MISSING)
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        base, key = object_at(node.value, receiver, model), node.slice[0].slice.value
        if base is MISSING or not isinstance(key, (cst.Integer, cst.SimpleString)):
            return MISSING
        try:
            return base[key.evaluated_value]
        except Exception:  # noqa: BLE001 - not a literal index into a module container
            return MISSING
    return MISSING


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
        return object_at(node, self.receiver, self.model)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        owner = self._object(original.value)
        slot = None if owner is MISSING else self.table.get(owner, original.attr.value)
        if slot is None:
            return updated
        if slot.key not in self.names:
            self.names[slot.key] = (self.namespace.fresh(f"state_{slot.attribute}"), slot)
        return cst.Name(self.names[slot.key][0])


class _OpaqueReaders(cst.CSTVisitor):
    """Finds a call kept as a call (traced into a sub-DNN) of a module holding a threaded slot: the
    traced graph would read the slot's value at compile time."""

    def __init__(self, replacer: _ReplaceSlots, owners: dict[int, list[StateSlot]], untraced: frozenset[int]) -> None:
        super().__init__()
        self.replacer, self.owners, self.untraced = replacer, owners, untraced
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
                for slot in self.owners.get(id(inner), ()):
                    if graph_may_read(module, inner, slot.attribute, self.untraced):
                        self.found = (self.statement, module, slot)
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


def _list_slot(slot: StateSlot, kind: str) -> StateSlot:
    """The ``length`` or ``prior`` slot of list slot ``slot`` (``rewriter.state_lists``)."""
    return StateSlot(slot.module, slot.attribute, kind, slot.module_id)


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
    body = [statement.visit(LiteralGetattr()) for statement in body]  # getattr(self, "n") reads self.n
    _refuse_state_properties(ctx, body, receiver)
    replacer = _ReplaceSlots(receiver, model, table, ctx.namespace)
    body = [statement.visit(replacer) for statement in body]
    if not replacer.names:
        return body, ()
    owners: dict[int, list[StateSlot]] = {}
    for _, slot in replacer.names.values():
        owners.setdefault(slot.module_id, []).append(slot)
    readers = _OpaqueReaders(replacer, owners, ctx.written_hooks)
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
    body, added = thread_lists(ctx, body, {name: state.path for name, state in lists.items()}, ctx.namespace)
    threaded += tuple(ThreadedState(length, lists[name].path, _list_slot(lists[name].slot, "length"))
                      for name, length in added.lengths.items())
    threaded += tuple(ThreadedState(prior, lists[name].path, _list_slot(lists[name].slot, "prior"))
                      for name, prior in added.priors.items())
    _refuse_assigned_reads(ctx, body, {state.parameter: state for state in threaded if state.kind == "assigned"})
    names = [state.parameter for state in threaded]
    body = [statement.visit(_ReturnState(names)) for statement in body]
    if not _always_returns(body):
        body.append(cst.SimpleStatementLine([cst.Return(cst.parse_expression(
            "(None, (" + "".join(f"{name}, " for name in names) + "))"))]))
    tensors = frozenset(state.parameter for state in threaded if state.kind == "tensor")
    fresh = [cst.parse_statement(f"{name} = []\n") for name in lists]  # the items this call appends
    fresh += [cst.parse_statement(f"{s.parameter} = {s.kind}({s.parameter})\n") for s in threaded
              if s.kind in ("dict", "set")]  # a copy: the caller's stays as it was
    fresh += [cst.parse_statement(f"{s.parameter} = None\n") for s in threaded if s.kind == "assigned"]
    return fresh + local_writes(body, tensors), threaded


def _refuse_assigned_reads(ctx: RewriteContext, body: list[cst.BaseStatement],
                           assigned: dict[str, ThreadedState]) -> None:
    """An attribute the call creates (kind ``assigned``) may only be assigned: a read would see the
    value of an earlier call, or none, where the compiled function starts it as None."""
    if not assigned:
        return
    finder = _AssignedUses(frozenset(assigned))
    for statement in body:
        statement.visit(finder)
    if finder.found is not None:
        statement, name = finder.found
        raise ctx.error(f"a read of {assigned[name].path}, an attribute that forward() or a hook creates",
                        statement, "create the attribute in __init__ (a tensor or a number), so that its value "
                        "before the call is known")


def _refuse_state_properties(ctx: RewriteContext, body: list[cst.BaseStatement], receiver: str) -> None:
    """A read that may reach a slot other than by its chain (a property's getter, ``__dict__``,
    ``getattr`` with a computed name or a default: ``rewriter.state_properties``) is refused: it
    runs nowhere in the compiled model, and folding it froze the slot's value."""
    finder = _StateProperties(receiver, ctx.model, ctx.state)
    for statement in body:
        statement.visit(finder)
    if finder.found is not None:
        statement, owner, name = finder.found
        raise ctx.error(f"a read of {type(owner).__name__}.{name} (a property, __dict__ or getattr), which may "
                        "read module state that forward() writes", statement,
                        "read the state as self.<name> in forward(), or make a property a method and call it")


class _StateProperties(cst.CSTVisitor):
    def __init__(self, receiver: str, model: torch.nn.Module, table: StateTable) -> None:
        super().__init__()
        self.receiver, self.model, self.table = receiver, model, table
        self.statement: cst.CSTNode | None = None
        self.found: tuple[cst.CSTNode, Any, str] | None = None

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.statement = node

    def visit_If(self, node: cst.If) -> None:
        self.statement = node

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self.found is not None:
            return
        owner, name = object_at(node.value, self.receiver, self.model), node.attr.value
        if owner is not MISSING and not self.table.holds(owner, name) and \
                attribute_may_read_state(self.table, owner, name):  # a slot read by name is threaded
            self.found = (self.statement, owner, name)

    def visit_Call(self, node: cst.Call) -> None:  # getattr(self, "slot", default)
        if self.found is None and isinstance(node.func, cst.Name) and node.func.value == "getattr" and node.args:
            owner = object_at(node.args[0].value, self.receiver, self.model)
            if owner is not MISSING and any(slot.module_id == id(owner) for slot in self.table.slots.values()):
                self.found = (self.statement, owner, "getattr")


class _AssignedUses(cst.CSTVisitor):
    def __init__(self, names: frozenset[str]) -> None:
        super().__init__()
        self.names = names
        self.targets: set[int] = set()
        self.statement: cst.CSTNode | None = None
        self.found: tuple[cst.CSTNode, str] | None = None

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.statement = node

    def visit_If(self, node: cst.If) -> None:
        self.statement = node

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        if isinstance(node.target, cst.Name):
            self.targets.add(id(node.target))

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.names and id(node) not in self.targets and self.found is None:
            self.found = (self.statement, node.value)


__all__ = ["MISSING", "ThreadedState", "object_at", "thread_state"]
