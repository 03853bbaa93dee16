"""``len(t)`` of a tensor inside a submodule that a sub-DNN calls as one graph, traced as a size.

A submodule without control flow stays an opaque call in a sub-DNN's statements
(``self_1.layers[3](fwd)``) and is traced with the sub-DNN. Inside it, ``len(x)``
hands the tracer a plain Python int (``len`` converts whatever ``Tensor.__len__``
returns to one), so ``torch.zeros([len(x), self.num_classes])`` — the DyCL authors'
SDN blocks allocate their empty output so — pins the graph to the example's batch
(``dycl.backends.size_pins``). ``t.size(0)`` is recorded as a size of ``t``: where that
dim is symbolic, the graph keeps it symbolic (``hcfg.traced_lengths`` does the same
for the sub-DNN's own statements).

``traced_module_lengths`` rewrites each such call ``<term>(args)`` in the statements,
where ``<term>`` names a submodule (statically: the sub-DNN's receiver, a global, then
attributes and integer subscripts) whose ``forward`` is Python code outside torch
that reads the builtin ``len``, into a call of a stand-in: a shallow copy of the
submodule (same parameters, buffers, children and hooks; ``nn.Module.__call__`` runs
as it would) whose ``forward`` is the original function, bound to the original
submodule, with its globals seen through a mapping in which ``len`` is ``traced_len``.

Assumes: the statements are run only to trace or to compute what the original
computes (eager, fake tensors). Guarantees: ``traced_len`` is ``builtins.len`` except
while the TorchScript tracer runs on a tensor of rank >= 1, where it is
``t.size(0)``: the value torch computes equal to it, given as the tracer gives every
``x.size(0)`` (a later Python read of it is a shape read the export guards or pins as
before). The user's module, its class and its function's globals are never changed;
only the function's own ``forward`` is followed (a ``len`` in code it calls stays as
it was: pinned, with the warning).
"""

from __future__ import annotations

import builtins
import copy
import os
import types
from typing import Any

import libcst as cst
import torch

from dycl.rewriter.errors import UnsupportedError
from dycl.rewriter.forward import resolve_method
from dycl.rewriter.walk import map_children

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


def traced_len(value: Any) -> Any:
    """``len(value)``; while the TorchScript tracer runs, ``value.size(0)`` of a tensor (module note)."""
    if isinstance(value, torch.Tensor) and value.dim() > 0 and torch._C._get_tracing_state() is not None:
        return value.size(0)
    return builtins.len(value)


def _static(node: cst.BaseExpression, namespace: dict[str, Any], local: set[str]) -> Any:
    """The object ``node`` names without running user code, or None."""
    if isinstance(node, cst.Name):
        return None if node.value in local else namespace.get(node.value)
    if isinstance(node, cst.Attribute):
        base = _static(node.value, namespace, local)
        if isinstance(base, torch.nn.Module):
            found = getattr(base, node.attr.value, None)
            return found if isinstance(found, torch.nn.Module) else None
        return None
    if (isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index)
            and isinstance(node.slice[0].slice.value, cst.Integer)):
        base = _static(node.value, namespace, local)
        if isinstance(base, (torch.nn.ModuleList, torch.nn.Sequential)):
            index = int(node.slice[0].slice.value.value)
            return base[index] if -len(base) <= index < len(base) else None
    return None


def _reads_len(function: Any) -> bool:
    code = getattr(function, "__code__", None)
    return (isinstance(function, types.FunctionType) and code is not None and "len" in code.co_names
            and "len" not in function.__globals__ and not code.co_filename.startswith(_TORCH_DIR))


class _Globals(dict):
    """A function's globals as it sees them, with ``len`` traced (a live view: a global
    assigned later is seen, as it would be)."""

    def __init__(self, original: dict[str, Any]) -> None:
        super().__init__(original)
        self.original = original

    def __missing__(self, name: str) -> Any:
        return self.original[name]


def _stand_in(module: torch.nn.Module) -> torch.nn.Module | None:
    """The shallow copy whose forward sees ``traced_len`` (module note); None where the
    forward reads no ``len`` or is not plain Python code."""
    try:
        resolved = resolve_method(module)
    except UnsupportedError:
        return None
    function = resolved.function
    if resolved.keywords or not _reads_len(function):
        return None
    seen = _Globals(function.__globals__)
    seen["len"] = traced_len
    traced = types.FunctionType(function.__code__, seen, function.__name__, function.__defaults__,
                                function.__closure__)
    traced.__kwdefaults__ = function.__kwdefaults__
    try:
        clone = copy.copy(module)
    except Exception:  # noqa: BLE001 - a module that cannot be copied keeps its call (and the pinned graph)
        return None
    object.__setattr__(clone, "forward", types.MethodType(traced, resolved.owner))
    return clone


def traced_module_lengths(statements: list[cst.SimpleStatementLine], namespace: dict[str, Any],
                          local: set[str], receiver: tuple[str, torch.nn.Module]) -> list[cst.SimpleStatementLine]:
    """``statements`` with each call of a submodule whose forward reads ``len`` going to its
    stand-in, bound in ``namespace`` under a fresh name (module note). ``local``: the
    sub-DNN's variables; ``receiver``: the name of its ``self`` parameter and the model."""
    stand_ins: dict[int, str] = {}
    names = {**namespace, receiver[0]: receiver[1]}
    local = local - {receiver[0]}

    def visit(current: cst.CSTNode) -> cst.CSTNode:
        current = map_children(current, visit)
        if not isinstance(current, cst.Call):
            return current
        module = _static(current.func, names, local)
        if not isinstance(module, torch.nn.Module):
            return current
        if id(module) not in stand_ins:
            clone = _stand_in(module)
            if clone is None:
                return current
            name = f"_dycl_traced_len_{len(stand_ins)}"
            while name in namespace or name in local:
                name += "_"
            namespace[name] = clone
            stand_ins[id(module)] = name
        return current.with_changes(func=cst.Name(stand_ins[id(module)]))

    return [visit(statement) for statement in statements]


__all__ = ["traced_len", "traced_module_lengths"]
