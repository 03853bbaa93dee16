"""Hooks that write module state: which ones dycl compiles as code, and whose state they write.

A hook that writes Python state (``module.calls += 1``, ``module.running.mul_(m).add_(v)``,
``self.seen.append(output)`` in a hook that is a method of a module of the model) cannot be
traced: the trace runs it once, at compile time. Such a hook is instead written out at each
call site of its module as a call of the hook's function (``rewriter.written_hooks``), which the
inliner inlines like a method of the module the hook is registered on: the hook's first
parameter is its receiver, so its writes become state slots (``rewriter.state_slots``) threaded
through the compiled function like those of ``forward``.

``hook_refusal`` says why a state-writing hook cannot be written out (None when it can):

- it must be a Python function (a ``def``, a closure, a lambda) or a bound method of a module
  of the model (then ``self`` is the receiver): a callable instance, a ``functools.partial`` or a
  builtin is refused;
- every write in it must be rooted at its receiver (its first parameter) or at a local holding a
  fresh value; its other parameters (the arguments, the output) may only have their tensors
  changed in place or by item; a write to a global, to a closure variable or to a local bound to
  one (``features[name] = output``), ``global``/``nonlocal`` and ``setattr`` on anything else
  are refused (no compiled artefact can write the user's dict);
- the user functions it calls must write nothing (``rewriter.hooks``);
- ``m.__dict__.update(name=v)`` on its receiver must mean ``m.name = v``
  (``rewriter.attribute_updates``, which writes it so);
- a module whose hooks are written out has no global module hooks (``register_module_forward_hook``).

``hook_receiver`` gives the receiver and its modules for a function registered as a hook of
modules whose hooks are written out. Assumes: hooks are registered before ``dycl.compile`` and
not changed afterwards.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator

import libcst as cst
import torch
from dycl.rewriter.attribute_updates import dict_update_names, dict_update_refusal
from dycl.rewriter.errors import UnsupportedError
from dycl.rewriter.hooks import Hook, forward_hooks
from dycl.rewriter.locations import LocationTable
from dycl.rewriter.source import parse_function
from dycl.rewriter.vocabulary import MUTATING_METHODS
from dycl.rewriter.walk import bound_names, descendants
from torch.nn.modules import module as _module


def hook_refusal(hook: Hook, module: torch.nn.Module, model: torch.nn.Module,
                 reaches_writes: Callable[[object], str | None]) -> str | None:
    """Why ``hook`` (on ``module``, which writes state) cannot be written out as code; None if it can.
    ``reaches_writes``: what a user function the hook calls writes (``rewriter.hooks``)."""
    if _module._global_forward_hooks or _module._global_forward_pre_hooks:
        return "and global module hooks are registered too (their order with it is not compiled)"
    function = hook.function
    if isinstance(function, types.MethodType):
        owner = function.__self__
        if not any(owner is inner for inner in model.modules()):
            return "is a method of an object outside the model"
        if getattr(type(owner), function.__func__.__name__, None) is not function.__func__:
            return "is a method dycl cannot call by its name"
        function = function.__func__
    elif not isinstance(function, types.FunctionType):
        return "is not a Python function or a method of a module of the model"
    try:
        definition = parse_function(function, LocationTable(), closures=True).definition
    except UnsupportedError as exc:
        return f"cannot be read ({exc.construct})"
    problem = _foreign_write(definition, function)
    if problem is None:
        receiver = getattr(hook.function, "__self__", module)  # whose __dict__ the receiver's is
        problem = dict_update_refusal(receiver, dict_update_names(definition, _first_parameter(definition)))
    return problem if problem is not None else reaches_writes(function)


def _first_parameter(definition: cst.FunctionDef) -> str:
    params = (*definition.params.posonly_params, *definition.params.params)
    return params[0].name.value if params else ""


def _foreign_write(definition: cst.FunctionDef, function: types.FunctionType) -> str | None:
    """The first write in ``definition`` to something not reached from its own names, or None."""
    params = [p.name.value for p in (*definition.params.posonly_params, *definition.params.params)]
    own = set(bound_names(definition)) | set(params)
    foreign = {name for name in own if name not in params and _bound_to_outside(definition, name, own, function)}
    own -= foreign
    for node in descendants(definition):
        if isinstance(node, (cst.Global, cst.Nonlocal)):
            return "declares a global or nonlocal name"
        for root, what in _written_roots(node, function):
            if root is None or root == params[0] or (root in own and root not in params):
                continue
            if root not in own:
                return f"writes {what} of {root!r}, which is not state of a module of the model"
            if what not in ("an item", "an in-place method"):  # an argument's tensor changed in place is code
                return f"writes {what} of its argument {root!r} (only {params[0]!r}'s attributes are compiled as state)"
    return None


def _written_roots(node: cst.CSTNode, function: types.FunctionType) -> Iterator[tuple[str | None, str]]:
    """The root names of what ``node`` writes, each with a word for how."""
    targets: list[cst.BaseExpression] = []
    if isinstance(node, cst.Assign):
        targets = [t.target for t in node.targets]
    elif isinstance(node, (cst.AugAssign, cst.AnnAssign)):
        targets = [node.target]
    elif isinstance(node, cst.Del):
        targets = [node.target]
    for target in targets:
        for element in _elements(target):
            if isinstance(element, cst.Attribute):
                yield _root(element), "an attribute"
            elif isinstance(element, cst.Subscript):
                yield _root(element), "an item"
    if not isinstance(node, cst.Call):
        return
    func = node.func
    positional = [a.value for a in node.args if a.keyword is None and not a.star]
    if isinstance(func, cst.Name) and func.value in ("setattr", "delattr") and positional:
        yield _root(positional[0]), f"{func.value}()"
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == "out":
            yield _root(arg.value), "out="
    if isinstance(func, cst.Attribute) and _mutates(func.attr.value):
        root, method = _root(func.value), func.attr.value
        how = "an in-place method" if method.endswith("_") and not method.startswith("_") else f"{method}()"
        if isinstance(function.__globals__.get(root), types.ModuleType):  # torch.nn.init.zeros_(t)
            if positional:
                yield _root(positional[0]), how
        else:
            yield root, how


def _elements(target: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    if isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _elements(element.value)
    else:
        yield target


def _mutates(method: str) -> bool:
    return method in MUTATING_METHODS or (method.endswith("_") and not method.startswith("_"))


def _root(node: cst.BaseExpression) -> str | None:
    """``a`` for ``a.b[0].c``, ``a.view(-1)``; None for anything not rooted at a name."""
    while True:
        if isinstance(node, (cst.Attribute, cst.Subscript)):
            node = node.value
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            node = node.func.value
        else:
            return node.value if isinstance(node, cst.Name) else None


def _bound_to_outside(definition: cst.FunctionDef, name: str, own: set[str], function: types.FunctionType) -> bool:
    """Whether local ``name`` is bound somewhere to a value reached from a global or closure name
    (``d = FEATURES``), other than a Python module's function result (``torch.zeros(3)``)."""
    for node in descendants(definition):
        if not isinstance(node, cst.Assign) or not any(
                isinstance(t.target, cst.Name) and t.target.value == name for t in node.targets):
            continue
        root = _root(node.value)
        if root is not None and root not in own and not isinstance(function.__globals__.get(root), types.ModuleType):
            return True
    return False


def hook_receiver(model: torch.nn.Module, written: frozenset[int], function: types.FunctionType,
                  definition: cst.FunctionDef) -> tuple[str, list[torch.nn.Module]] | None:
    """``(first parameter, modules)`` when ``function`` is registered as a plain-function hook on
    ``modules`` of ``model`` whose hooks are written out (``written``: their ids); else None."""
    params = (*definition.params.posonly_params, *definition.params.params)
    if not written or not params:
        return None
    owners = [module for module in model.modules() if id(module) in written
              and any(hook.function is function for hook in forward_hooks(module))]
    return (params[0].name.value, owners) if owners else None


__all__ = ["hook_receiver", "hook_refusal"]
