"""Calls whose results belong with the tensor code although they are not all tensors.

A helper or a library function called on tensors often returns statics next to, or instead
of, tensors: ``attn_output, attn_weights`` with no weights (``None``), ``mask = create_causal_mask(...)``
that needs no mask on these sizes (``None``), ``mask, dtype, device = self._mask_inputs(h)``.
The host cannot run such a call (it has arrays, not tensors, and no torch), so the statement
is placed in a sub-DNN and traced as any call of tensor code is: the trace's reads of tensor
values are refused and its decisions on sizes guarded when it is exported
(``dycl.backends.onnx_export``), so a static it returns holds wherever the graph does. The
statics leave the graph as port-less leaves (``hcfg.ports.Static``), and a sub-DNN left with
only statics to give is never run (``hostgen.host_loader``, note "static outputs").

Assumes: the value was computed by running the call on the example's state; ``statics`` are
the leaves ``hcfg.pytree_ports`` compiles in without a port.

Guarantees: ``belongs_with_tensors`` holds only for a call expression, and, where the value
holds no tensor, only for a call that receives a tensor and whose callee the host could not
call (a method, a submodule, an installed library's function, a function of the user's that
works on its tensor arguments or on torch); a plain helper the host can copy stays on the host.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
import types
from collections.abc import Callable
from typing import Any

import libcst as cst
import torch
from dycl.rewriter.local_access import access_roots, local_names
from dycl.rewriter.user_code import followable, is_user_code

#: leaves compiled into a graph without a port (``hcfg.pytree_ports``)
STATICS = (torch.device, torch.dtype, str, type(None))


def tensors_and_statics(value: Any, is_tensor_value: Callable[[Any], bool]) -> bool:
    """A tuple of tensors (``is_tensor_value``) and statics with a tensor among them (``out, None``)."""
    return isinstance(value, tuple) and any(isinstance(v, torch.Tensor) for v in value) and all(
        isinstance(v, STATICS) or is_tensor_value(v) for v in value)


def only_statics(value: Any) -> bool:
    """``None``, a dtype, a device, a string, or a non-empty tuple or list of them."""
    if isinstance(value, (tuple, list)):
        return bool(value) and all(only_statics(v) for v in value)
    return isinstance(value, STATICS)


def belongs_with_tensors(node: cst.BaseExpression, value: Any, evaluate: Callable[[cst.BaseExpression], Any],
                         is_tensor_value: Callable[[Any], bool]) -> bool:
    """Whether ``node`` (an assigned expression whose value on the example is ``value``) is a call
    of tensor code to trace: it returned tensors and statics, or only statics from a callee the
    host cannot call given a tensor (module note). ``evaluate``: an expression's value on the example."""
    if not isinstance(node, cst.Call):
        return False
    if tensors_and_statics(value, is_tensor_value):
        return True
    if not only_statics(value):
        return False
    if not any(isinstance(evaluate(argument.value), torch.Tensor) for argument in node.args):
        return False
    return _host_cannot_call(evaluate(node.func))


def _host_cannot_call(func: Any) -> bool:
    """A submodule, a method (the model's), an installed library's function, or a plain function of
    the user's that works on its tensors or on torch (the host copies only helpers of numbers:
    ``hostgen.host_globals``; one that only passes its arguments on stays a host operation)."""
    if isinstance(func, torch.nn.Module):
        return True
    target = getattr(func, "__func__", func)  # a bound method: its function
    code = getattr(target, "__code__", None)
    if code is None:
        return False
    if followable(code.co_filename) or target is not func:
        return True
    return is_user_code(target) and _works_on_tensors(target)


def _works_on_tensors(function: Any) -> bool:
    """Whether ``function`` reads an attribute or item of one of its locals (a tensor argument: on
    the host, a numpy array) or a global module outside the standard library (torch)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return True
    local = local_names(tree)
    if any(isinstance(root, ast.Name) and root.id in local for root in access_roots(tree)):
        return True
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            value = getattr(function, "__globals__", {}).get(node.id)
            if isinstance(value, types.ModuleType) and value.__name__.split(".")[0] not in sys.stdlib_module_names:
                return True
    return False


__all__ = ["STATICS", "belongs_with_tensors", "only_statics", "tensors_and_statics"]
