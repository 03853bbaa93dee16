"""The part of the model a sub-DNN's statements can read, as a module tree to hand the exporter.

The TorchScript exporter makes every entry of the exported module's ``state_dict`` an input of
the trace (``torch.jit._trace._unique_state_dict``, several times per export) and drops the
unused ones afterwards. A sub-DNN module that registered the whole model paid for walking the
whole model's state in every export (on BlockDrop, 236 walks and ~4 s of a 27 s compile).

``read_roots`` finds, in the statements, every chain from the receiver (``self.blocks[3].conv``:
attributes and literal subscripts) and resolves it on the model through the module registry
only (``_modules``, ``_parameters``, ``_buffers``: no user code runs). A chain that reaches a
parameter or buffer reads that tensor; one that reaches a submodule, or stops inside one (a
method, a dynamic index ``self.heads[k]``, an attribute that is not a module), reads that
submodule's whole subtree. ``weights_tree`` rebuilds those parts under their paths in a tree of
plain containers, registering the model's own objects (no copies), so the exported graph's
initializers keep the names the whole model gives them (``model.blocks.3.conv.weight``).

Assumes: a value the statements reach other than through the receiver (a global module, a
module object kept outside the registry) was not in the model's ``state_dict`` before either.
Guarantees: every registered tensor of the model the statements can reach through the receiver
is in the tree. Where that cannot be told — the receiver used as a plain value
(``helper(self, x)``), a chain that stops on the model itself at something that is not a plain
Python value (a method, a property, a name only a ``__getattr__`` of the model's class resolves)
— the answer is the whole model (``None``), as before; below a submodule whose class has its own
``__getattr__``, that whole submodule.
A tensor missed all the same would only be traced as a constant of its compile-time value.
"""

from __future__ import annotations

import inspect

import libcst as cst
import torch

#: attribute values of the model that read no state (what constant propagation may leave unfolded)
_PLAIN = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.Size)
_MISSING = object()


def read_roots(statements: list[cst.SimpleStatementLine], receiver: str, model: torch.nn.Module
               ) -> set[str] | None:
    """The dotted paths in ``model`` (modules, parameters, buffers) that ``statements`` read
    through ``receiver``; None where the whole model must be assumed read (module note)."""
    roots: set[str] = set()
    pending: list[cst.CSTNode] = list(statements)
    while pending:
        node = pending.pop()
        if isinstance(node, (cst.Attribute, cst.Subscript, cst.Name)):
            base, steps, inner = _unwind(node)
            pending += inner
            if isinstance(base, cst.Name) and base.value == receiver:
                path = _resolve(model, steps)
                if path is None:
                    return None
                if path:
                    roots.add(path)
                continue
            if base is not node:
                pending.append(base)
                continue
            if isinstance(node, cst.Name):
                continue
        pending += node.children
    return roots


def _unwind(node: cst.BaseExpression) -> tuple[cst.BaseExpression, list[str | int], list[cst.CSTNode]]:
    """The base of an attribute/subscript chain, its static steps from the base (cut at the first
    step that is not a name or a literal index), and the dynamic parts to walk on their own."""
    steps: list[str | int] = []
    inner: list[cst.CSTNode] = []
    while True:
        if isinstance(node, cst.Attribute):
            steps.insert(0, node.attr.value)
            node = node.value
        elif isinstance(node, cst.Subscript):
            index = _literal_index(node)
            if index is None:
                steps.clear()  # everything after a dynamic index is unknown: keep the prefix only
                inner += node.slice
            else:
                steps.insert(0, index)
            node = node.value
        else:
            return node, steps, inner


def _literal_index(node: cst.Subscript) -> str | int | None:
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return None
    value = node.slice[0].slice.value
    if isinstance(value, cst.Integer):
        return int(value.value)
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus) and \
            isinstance(value.expression, cst.Integer):
        return -int(value.expression.value)
    if isinstance(value, cst.SimpleString):
        return value.evaluated_value if isinstance(value.evaluated_value, str) else None
    return None


def _resolve(model: torch.nn.Module, steps: list[str | int]) -> str | None:
    """The dotted path of what ``steps`` read in ``model``: the tensor or submodule reached,
    else the deepest submodule passed; "" for a plain value of the model; None where the
    model itself would be read (module note)."""
    current: torch.nn.Module = model
    path: list[str] = []
    for step in steps:
        if type(current).__getattr__ is not torch.nn.Module.__getattr__:  # its own lookup: any step may go anywhere
            return ".".join(path) or None
        key = _child_key(current, step)
        if key is not None and key in current._modules and current._modules[key] is not None:
            current = current._modules[key]
            path.append(key)
            continue
        if isinstance(step, str) and (step in current._parameters or step in current._buffers):
            return ".".join([*path, step]) if current._parameters.get(step, current._buffers.get(step)) \
                is not None else ".".join(path)
        if path:
            return ".".join(path)
        plain = isinstance(step, str) and isinstance(inspect.getattr_static(model, step, _MISSING), _PLAIN)
        return "" if plain else None  # not found statically (a __getattr__ of its own): the whole model
    return ".".join(path) or None


def _child_key(module: torch.nn.Module, step: str | int) -> str | None:
    """The registry key ``module.<step>`` / ``module[step]`` names (negative indices of a list counted back)."""
    if isinstance(step, int):
        if not isinstance(module, (torch.nn.ModuleList, torch.nn.Sequential)):
            return None
        index = step + len(module) if step < 0 else step
        keys = list(module._modules)
        return keys[index] if 0 <= index < len(keys) else None
    return step


def weights_tree(model: torch.nn.Module, roots: set[str]) -> torch.nn.Module:
    """Plain containers holding the model's own submodules, parameters and buffers at ``roots``
    (each under its path; a root inside another root is already there)."""
    tree = torch.nn.Module()
    kept = sorted(roots, key=lambda path: path.count("."))
    placed: list[str] = []
    for path in kept:
        if any(path.startswith(outer + ".") for outer in placed):
            continue
        placed.append(path)
        *parents, name = path.split(".")
        owner, into = model, tree
        for key in parents:
            owner = owner._modules[key]
            if key not in into._modules:
                into._modules[key] = torch.nn.Module()
            into = into._modules[key]
        if name in owner._modules:
            into._modules[name] = owner._modules[name]
        elif name in owner._parameters:
            into._parameters[name] = owner._parameters[name]
        else:
            into._buffers[name] = owner._buffers[name]
            if name in owner._non_persistent_buffers_set:
                into._non_persistent_buffers_set.add(name)
    return tree


__all__ = ["read_roots", "weights_tree"]
