"""Find the module state a method writes, and refuse the writes dycl does not compile.

``RejectStateWrites`` finds every write to module state syntactically; this
subclass records the ones dycl compiles as state slots (``rewriter.state_table``)
and refuses the rest with the user's file:line, as before:

- compiled: a write to ``self.<attr>`` or ``self.<sub>...<attr>`` (also through a
  local alias or a view of it) where the attribute exists on an ``nn.Module`` of the
  model and holds a tensor (parameter, buffer or plain tensor attribute), a
  ``bool``, an ``int`` or a ``float``: in-place tensor methods and functions (also called on
  ``self.<attr>.data``: CLIP's ``self.logit_scale.data.clamp_(0, 4.6052)``),
  ``out=``, assignment and augmented assignment (also to an item of a tensor); item writes
  to a dict of bools, ints and floats keyed by strings (kind ``dict``); and
  ``self.<list>.append(v)`` on a list of tensors and Python numbers (kind ``list``: the items
  appended are the compiled part; ``rewriter.state_lists`` threads what forward() reads of it);
  and a set of numbers and strings changed by its methods (``add``: also a tensor method's name,
  so the attribute's value decides), ``|=`` or assignment (kind ``set``);
- compiled too: an assignment to an attribute that does not exist yet (``m.last = o.detach()``
  in a hook, kind ``assigned``: ``rewriter.state_threading`` refuses any read of it);
- refused: an assignment to ``.data`` or an item of it, other container writes on ``self`` (item writes,
  ``extend``...), ``del``, ``setattr``,
  module mutators (``register_buffer``, ``train``...), attributes ``forward`` creates by any
  other write, and attributes holding any other value.

``rewriter.state_prescan`` runs ``CollectStateWrites`` leniently on the methods ``forward``
may reach before any rewriting, so that no pass folds a read of state.
Assumes: a write through a plain function's argument is not seen here (it is caught when
compiling, by ``dycl.model.model_state``).
"""

from __future__ import annotations

import inspect
import types

import libcst as cst
import torch
from dycl.rewriter.context import RewriteContext
from dycl.rewriter.deferred_refusals import DeferredRefusal, defer
from dycl.rewriter.errors import UnsupportedError
from dycl.rewriter.hook_effects import hook_receiver
from dycl.rewriter.state_table import StateTable, is_list_item, kind_of
from dycl.rewriter.state_writes import (
    _CONTAINER_WRITES,
    _MODULE_WRITES,
    _SELF_CONVERSIONS,
    _VIEWS,
    RejectStateWrites,
    _code,
    receiver_name,
)
from dycl.rewriter.vocabulary import SET_MUTATORS, TENSOR_NAMESAKES
from dycl.rewriter.walk import bound_names

_HINT = ("dycl compiles writes to module attributes holding tensors, bools, ints and floats; keep other state "
         "in local variables and return it, or update it outside the compiled model")


class CollectStateWrites(RejectStateWrites):
    """Records compiled writes in ``table``; refuses the others (or, ``lenient``, skips them)."""

    def __init__(self, ctx: RewriteContext, receiver: str | None, locals_: frozenset[str],
                 owners: list[torch.nn.Module], table: StateTable, lenient: bool = False) -> None:
        super().__init__(ctx, receiver, locals_, owners[0] if owners else None)
        self.owners = owners
        self.table = table
        self.lenient = lenient
        self.wrote = False  # whether some write was recorded
        self.deferred: dict[int, UnsupportedError] = {}  # statement line id -> its refusal, where reached

    def _refuse(self, what: cst.CSTNode, how: str = "") -> None:
        reason = self._record(what, how)
        self.wrote = self.wrote or reason is None
        if reason is None or self.lenient:
            return
        statement = self.statement[-1] if self.statement else None
        error = self.ctx.error(f"a write to module state ({f'{how} ' if how else ''}{_code(what)}) inside forward(): "
                               f"{reason}", statement, _HINT)
        if not isinstance(statement, cst.SimpleStatementLine):
            raise error
        self.deferred[id(statement)] = error  # refused where still reached (rewriter.deferred_refusals)

    def visit_Call(self, node: cst.Call) -> None:
        super().visit_Call(node)
        # ``self.seen.add(v)``: ``add`` is also a tensor method that writes nothing, so the
        # syntactic scan skips it; on an attribute holding a set it is a write
        func = node.func
        if (isinstance(func, cst.Attribute) and func.attr.value in _SET_NAMESAKES and self.state(func.value)
                and type(self._value_of(self._resolved(func.value))) is set):
            self._refuse(node)

    def _record(self, what: cst.CSTNode, how: str) -> str | None:
        """Record the slot ``what`` writes; the reason it is not compiled, or None."""
        if how == "del of":
            return "deleting module state is not compiled"
        appended = _appended_to(what)
        if appended is not None:
            return self._record_method(appended, "append")
        changed = _set_changed(what)
        if changed is not None:
            return self._record_method(changed, what.func.attr.value)
        if _assigns_through_data(what):
            return ("an assignment to .data (or to an item of it) is not compiled as state; write the tensor in "
                    "place instead (self.x.copy_(v), self.x.clamp_(...)) or assign self.x itself")
        chain = self._written(what)
        if chain is None:
            return _unfollowed(what)
        item = isinstance(chain, cst.Subscript)  # self.stats["n"] = ..., self.buf[0] = ...
        if item:
            chain = self._resolved(chain.value)
        parts = None if chain is None else _attribute_path(chain, self.receiver)
        if parts is None:
            return "a container on self (an item or a method of a list/dict) is not compiled as state"
        if not self.owners:
            return "the module this method belongs to is not part of the model"
        assigned = how == "an assignment to" and not item
        for owner in self.owners:
            reason = self._add(owner, parts, item=item, assigned=assigned)
            if reason is not None:
                return reason
        return None

    def _record_method(self, receiver: cst.BaseExpression, method: str) -> str | None:
        """``<list on self>.append(v)`` (the list is state whose compiled part is the items appended)
        or a set's ``add``/``discard``/... (the set is state kept by the host)."""
        chain = self._resolved(receiver)
        parts = None if chain is None else _attribute_path(chain, self.receiver)
        if parts is None or not self.owners:
            return (f"a container on self reached through another name (only self.<list>.append(v) and "
                    f"self.<set>.{method}(...) are compiled)")
        for owner in self.owners:
            reason = self._add(owner, parts, method=method)
            if reason is not None:
                return reason
        return None

    def _add(self, owner: torch.nn.Module, parts: list[str], method: str = "", item: bool = False,
             assigned: bool = False) -> str | None:
        module: object = owner
        for part in parts[:-1]:
            module = getattr(module, part, None)
        attribute = parts[-1]
        if not isinstance(module, torch.nn.Module):
            return f"{'.'.join(parts[:-1])} is not a module of the model"
        if not _has_attribute(module, attribute):
            if assigned and _new_attribute(module, attribute):  # created by the call: rewriter.state_threading
                self.table.add(module, attribute, "assigned")
                return None
            return f"the attribute {attribute!r} does not exist before the call (forward() would create it)"
        kind = _slot_kind(getattr(module, attribute), attribute, method, item)
        if kind not in SLOT_KINDS:
            return kind  # why not
        self.table.add(module, attribute, kind)
        return None

    def _written(self, what: cst.CSTNode) -> cst.BaseExpression | None:
        """The state expression ``what`` (a target, a call, an augmented alias) writes, aliases resolved."""
        if isinstance(what, cst.AugAssign):
            return self._resolved(what.target)
        if isinstance(what, cst.Call):
            func = what.func
            if isinstance(func, cst.Name):
                if func.value in ("setattr", "delattr"):
                    return None
                positional = [a.value for a in what.args if a.keyword is None and not a.star]
                return self._resolved(positional[0]) if positional else None
            if isinstance(func, cst.Attribute):
                name = func.attr.value
                bare = isinstance(func.value, cst.Name) and func.value.value == self.receiver
                if name.startswith("__") or name in _MODULE_WRITES or name in _CONTAINER_WRITES or (
                        bare and name in _SELF_CONVERSIONS):
                    return None
                if self.state(func.value):
                    return self._resolved(func.value)
                positional = [a.value for a in what.args if a.keyword is None and not a.star]
                return self._resolved(positional[0]) if positional else None
            return None
        return self._resolved(what) if isinstance(what, cst.BaseExpression) else None

    def _resolved(self, node: cst.BaseExpression, depth: int = 0) -> cst.BaseExpression | None:
        """``node`` with views stripped and aliases replaced by what they alias."""
        if depth > 20:
            return None
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _VIEWS:
            return self._resolved(node.func.value, depth + 1)
        if isinstance(node, cst.Attribute) and node.attr.value == "data":  # the same tensor, outside autograd
            return self._resolved(node.value, depth + 1)
        if isinstance(node, cst.Name) and node.value != self.receiver:
            origin = self.origins.get(node.value)
            return None if origin is None else self._resolved(origin, depth + 1)
        return node


#: the kinds of state slots a write records (``rewriter.state_table``)
SLOT_KINDS = frozenset({"tensor", "bool", "int", "float", "dict", "list", "set"})


def _slot_kind(value: object, attribute: str, method: str, item: bool) -> str:
    """The kind of slot a write to ``attribute`` holding ``value`` records (by ``method``, an item
    write or else an assignment), or the reason it is not compiled."""
    held = type(value).__name__
    if method == "append":
        if type(value) is not list or not all(is_list_item(member) for member in value):
            items = " with items other than tensors and numbers" if type(value) is list else ""
            return (f"the attribute {attribute!r} holds a {held}{items}; appending is compiled for a list of "
                    "tensors and Python numbers")
        return "list"
    if method or type(value) is set:
        if type(value) is not set or not all(type(member) in _SET_MEMBERS for member in value):
            return (f"a container on self ({method or 'an assignment'} of a {held}) is not compiled as state"
                    if type(value) is not set else f"the set {attribute!r} holds values other than numbers and "
                    "strings")
        return "set"
    kind = kind_of(value)
    if item and kind != "tensor":
        if not _plain_dict(value):
            return (f"the attribute {attribute!r} holds a {held}; item writes are compiled for tensors and for "
                    "dicts of bools, ints and floats keyed by strings")
        return "dict"
    return kind if kind is not None else f"the attribute {attribute!r} holds a {held}, not a tensor, bool, int or float"


_SET_MEMBERS = (bool, int, float, str)
_SET_NAMESAKES = SET_MUTATORS & TENSOR_NAMESAKES  # set methods that tensors have too (writing nothing)


def _set_changed(what: cst.CSTNode) -> cst.BaseExpression | None:
    """``x`` for a call ``x.add(v)``, ``x.discard(v)``... (a set's mutating methods), else None."""
    if isinstance(what, cst.Call) and isinstance(what.func, cst.Attribute) and what.func.attr.value in SET_MUTATORS:
        return what.func.value
    return None


def _assigns_through_data(what: cst.CSTNode) -> bool:
    """Whether ``what`` assigns ``x.data`` or an item of it (an in-place method called on ``x.data`` is
    followed to ``x``; rebinding ``.data`` swaps the tensor's storage, which state threading does not)."""
    if isinstance(what, cst.Call):
        return False
    node = what.target if isinstance(what, cst.AugAssign) else what
    while isinstance(node, (cst.Attribute, cst.Subscript)):
        if isinstance(node, cst.Attribute) and node.attr.value == "data":
            return True
        node = node.value
    return False


def _plain_dict(value: object) -> bool:
    return type(value) is dict and all(isinstance(key, str) and type(item) in (bool, int, float)
                                       for key, item in value.items())


def _appended_to(what: cst.CSTNode) -> cst.BaseExpression | None:
    """``x`` for a call ``x.append(v)`` (one positional argument), else None."""
    if not isinstance(what, cst.Call) or not isinstance(what.func, cst.Attribute) or what.func.attr.value != "append":
        return None
    if len(what.args) != 1 or what.args[0].keyword is not None or what.args[0].star:
        return None
    return what.func.value


def _unfollowed(what: cst.CSTNode) -> str:
    """Why the write ``what`` is not one to an attribute dycl can thread."""
    func = what.func if isinstance(what, cst.Call) else None
    name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else ""
    if name in ("setattr", "delattr", "__setattr__", "__delattr__"):
        return f"{name}() on module state is not compiled (assign the attribute directly)"
    if name in _CONTAINER_WRITES or name in ("__setitem__", "__delitem__"):
        return f"a container on self ({name}() of a list/dict/set) is not compiled as state"
    if name in _MODULE_WRITES or name in _SELF_CONVERSIONS:
        return f"{name}() changes the model itself, which is not compiled as state"
    return ("the state is reached through a name dycl cannot follow to one attribute (a loop over "
            "self.parameters()/buffers(), a value returned by a call)")


def _attribute_path(node: cst.BaseExpression, receiver: str | None) -> list[str] | None:
    """``["sub", "attr"]`` for ``self.sub.attr``; None for anything but an attribute chain from the receiver."""
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not parts or not isinstance(node, cst.Name) or node.value != receiver:
        return None
    return parts[::-1]


def _has_attribute(module: torch.nn.Module, attribute: str) -> bool:
    return (attribute in vars(module) or attribute in module._parameters or attribute in module._buffers
            or attribute in module._modules)


def _new_attribute(module: torch.nn.Module, attribute: str) -> bool:
    """Whether ``module.attribute = v`` would create a plain instance attribute (nothing of that name yet)."""
    if type(module).__setattr__ is not torch.nn.Module.__setattr__:
        return False
    try:
        inspect.getattr_static(type(module), attribute)
    except AttributeError:
        return True
    return False


def owners_of(model: torch.nn.Module, function: types.FunctionType) -> list[torch.nn.Module]:
    """Every module of ``model`` whose class has ``function`` as its method of that name, or as
    a layer of it (a decorator's wrapper made with ``functools.wraps``, which takes the name)."""
    found = []
    for module in model.modules():
        method = getattr(type(module), function.__name__, None)
        if method is not None and function in wrapper_layers(method):
            found.append(module)
    return found


def state_receiver(ctx: RewriteContext, function: types.FunctionType,
                   definition: cst.FunctionDef) -> tuple[str | None, list[torch.nn.Module]]:
    """The name whose attributes are module state in ``function`` and the modules it stands for: a
    method's ``self``, or a hook's first parameter where its hooks are written out (``rewriter.hook_effects``)."""
    receiver = receiver_name(function, definition)
    if receiver is not None:
        return receiver, owners_of(ctx.model, function)
    hooked = hook_receiver(ctx.model, ctx.written_hooks, function, definition)
    return hooked if hooked is not None else (None, [])


def wrapper_layers(method: object) -> list[object]:
    """``method`` and each function it wraps (``__wrapped__``), outermost first."""
    layers = [method]
    while hasattr(layers[-1], "__wrapped__") and len(layers) < 100:
        layers.append(layers[-1].__wrapped__)
    return layers


def collect_state_writes(ctx: RewriteContext, function: types.FunctionType,
                         definition: cst.FunctionDef) -> tuple[cst.FunctionDef, dict[str, DeferredRefusal]]:
    """Record the state ``function`` writes in ``ctx.state``; the writes dycl does not
    compile become refusals where reached (``rewriter.deferred_refusals``): the definition
    with their markers, and the globals those name."""
    receiver, owners = state_receiver(ctx, function, definition)
    locals_ = frozenset(bound_names(definition)) - {receiver}
    collector = CollectStateWrites(ctx, receiver, locals_, owners, ctx.state)
    definition.visit(collector)
    if collector.wrote:
        ctx.state.writers.add(function)
    return defer(definition, collector.deferred)
