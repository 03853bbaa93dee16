"""Registry lookups that pick an implementation by configuration, evaluated at compile time.

Libraries choose an implementation from a registry keyed by a configured name:
transformers' ``@use_experts_implementation`` wrapper calls
``experts_interface.get_interface(self.config._experts_implementation, original_forward)``
and then the function it got (attention does the same with ``ALL_ATTENTION_FUNCTIONS``).
Left dynamic, the chosen function is an unknown callee: the call is traced as one graph,
and a chosen implementation that decides on data (the eager experts loop) is frozen.

A lookup is evaluated where all of these hold: the method's receiver is a mapping (the
registry: ``collections.abc.Mapping``) whose class comes from an installed package (not
torch, not the user's code: user code is rewritten, never called); every argument is a
string, ``None``, a function or a module (a key and a default, no tensor; a module: the
registry keys its entry on the module's class, as transformers' ``_CAN_RECORD_REGISTRY.get(self)``
does); and the result is a function or *registered data*: a mapping, list or tuple whose
leaves are strings, numbers, ``None``, classes or dataclass instances holding only such
values (which layers ``@capture_outputs`` records). Assumes, as for every global dycl reads:
the registry is not changed after compiling (the artifact keeps the implementation chosen now).
Guarantees: nothing else is called; a lookup whose result is neither counts as dynamic.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from typing import Any

import torch
from dycl.rewriter.user_code import in_library


def is_registry_lookup(func: Any) -> bool:
    """Whether ``func`` is a method of a library's registry (see the module note)."""
    code = getattr(getattr(func, "__func__", None), "__code__", None)
    if code is None:  # first: most callees are no Python method, and a Mapping check is an ABC's
        return False
    receiver = getattr(func, "__self__", None)
    if not isinstance(receiver, Mapping):
        return False
    module = (type(receiver).__module__ or "").split(".")[0]
    return module not in ("torch", "builtins", "collections") and in_library(code.co_filename)


def lookup_arguments_static(args: list[Any], kwargs: dict[str, Any]) -> bool:
    """Whether every argument is a key or a default a lookup may take: str, None, a function or a module."""
    return all(value is None or isinstance(value, (str, types.FunctionType, torch.nn.Module))
               for value in [*args, *kwargs.values()])


def chose_a_function(result: Any) -> bool:
    """Whether ``result`` is what a lookup may be folded to: a function or registered data."""
    return isinstance(result, types.FunctionType) or _registered_data(result, depth=0)


def _registered_data(value: Any, depth: int) -> bool:
    if depth > 4:
        return False
    if value is None or isinstance(value, (str, int, float, bool, type)):
        return True
    if isinstance(value, Mapping):
        return all(_registered_data(k, depth + 1) and _registered_data(v, depth + 1) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_registered_data(v, depth + 1) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return all(_registered_data(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value))
    return False


__all__ = ["chose_a_function", "is_registry_lookup", "lookup_arguments_static"]
