"""Attribute writes a hook spells as calls, written as assignments: ``setattr`` and ``__dict__.update``.

A lambda cannot assign, so a hook written as one stores what it saw with a call::

    lambda m, i, o: m.__dict__.update(last=o.detach())
    lambda m, i, o: setattr(m, "last", o.detach())

In a hook whose receiver (its first parameter, ``rewriter.hook_effects``) is ``m``, a statement
(or a returned value) that is such a call becomes the assignments it makes, so that the state
machinery sees them (``rewriter.state_slots``)::

    m.last = o.detach()
    return None

Assumes: ``setattr(m, "name", v)`` is ``m.name = v`` (Python defines it so); ``m.__dict__.update(name=v)``
is ``m.name = v`` only where the module's class neither defines ``name`` nor overrides
``nn.Module.__setattr__`` and ``name`` is no parameter, buffer or submodule, which
``hook_effects.hook_refusal`` checks (``dict_update_refusal``) before any hook is written out.
Guarantees: only those two forms, with literal names and keyword arguments only, on the receiver
itself, in a statement of their own or a ``return``; anything else is left as it was.
"""

from __future__ import annotations

import inspect

import libcst as cst
import torch


def attribute_updates(definition: cst.FunctionDef, receiver: str) -> cst.FunctionDef:
    """``definition`` with its receiver's ``setattr``/``__dict__.update`` calls written as assignments."""
    return definition.visit(_AttributeUpdates(receiver))


def dict_update_refusal(module: torch.nn.Module, names: list[str]) -> str | None:
    """Why ``module.__dict__.update(name=...)`` is not ``module.name = ...`` for one of ``names``; None if it is."""
    if type(module).__setattr__ is not torch.nn.Module.__setattr__:
        return f"updates __dict__ of a {type(module).__name__}, whose class defines __setattr__"
    for name in names:
        try:
            inspect.getattr_static(type(module), name)
        except AttributeError:
            pass
        else:
            return f"updates __dict__ with {name!r}, which the class {type(module).__name__} defines"
        if name in module._parameters or name in module._buffers or name in module._modules:
            return f"updates __dict__ with {name!r}, a parameter, buffer or submodule of the module"
    return None


def dict_update_names(definition: cst.FunctionDef, receiver: str) -> list[str]:
    """The attribute names ``definition`` sets with ``receiver.__dict__.update(...)``."""
    found: list[str] = []

    class _Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            assignments = _dict_update(node, receiver)
            found.extend(target.attr.value for target, _ in assignments or [])

    definition.visit(_Find())
    return found


class _AttributeUpdates(cst.CSTTransformer):
    def __init__(self, receiver: str) -> None:
        super().__init__()
        self.receiver = receiver

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine,
                                  updated: cst.SimpleStatementLine) -> cst.BaseStatement | cst.FlattenSentinel:
        if len(updated.body) != 1:
            return updated
        small = updated.body[0]
        call = small.value if isinstance(small, (cst.Expr, cst.Return)) else None
        assignments = _assignments(call, self.receiver) if isinstance(call, cst.Call) else None
        if assignments is None:
            return updated
        lines = [updated.with_changes(body=[cst.Assign([cst.AssignTarget(target)], value)])
                 for target, value in assignments]
        if isinstance(small, cst.Return):
            lines.append(updated.with_changes(body=[cst.Return(cst.Name("None"))]))
        return cst.FlattenSentinel(lines)


def _assignments(call: cst.Call, receiver: str) -> list[tuple[cst.Attribute, cst.BaseExpression]] | None:
    func = call.func
    if isinstance(func, cst.Name) and func.value == "setattr" and len(call.args) == 3 and not any(
            arg.keyword or arg.star for arg in call.args):
        owner, name, value = (arg.value for arg in call.args)
        if isinstance(owner, cst.Name) and owner.value == receiver and isinstance(name, cst.SimpleString):
            text = name.evaluated_value
            if isinstance(text, str) and text.isidentifier():
                return [(cst.Attribute(cst.Name(receiver), cst.Name(text)), value)]
        return None
    return _dict_update(call, receiver)


def _dict_update(call: cst.Call, receiver: str) -> list[tuple[cst.Attribute, cst.BaseExpression]] | None:
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "update" and isinstance(func.value, cst.Attribute)
            and func.value.attr.value == "__dict__" and isinstance(func.value.value, cst.Name)
            and func.value.value.value == receiver):
        return None
    if not call.args or any(arg.keyword is None or arg.star for arg in call.args):
        return None
    if len(call.args) > 1 and any(isinstance(node, cst.Name) and node.value == receiver
                                  for arg in call.args for node in _names(arg.value)):
        return None  # a value reading the receiver would see the assignments before it
    return [(cst.Attribute(cst.Name(receiver), cst.Name(arg.keyword.value)), arg.value) for arg in call.args]


def _names(node: cst.CSTNode) -> list[cst.Name]:
    found: list[cst.Name] = []

    class _Collect(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            found.append(name)

    node.visit(_Collect())
    return found


__all__ = ["attribute_updates", "dict_update_names", "dict_update_refusal"]
