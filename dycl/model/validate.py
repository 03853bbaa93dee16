"""Check what ``dycl.compile`` was given before any work starts.

Assumes nothing about its arguments. Guarantees, when it returns, that the model
is an ``nn.Module`` whose ``forward`` is Python source (what the rewriter
reads), that the example is a tensor or a tuple of positional arguments with no
numpy array or list standing in for it, and that the positional arguments plus
``kwargs`` cover every required parameter of ``forward`` without exceeding its
positional ones. Each mistake raises ``TypeError`` with a message that says
what to pass instead.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from dycl.rewriter.arguments import positional_arguments

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def validate(model: Any, example: Any, kwargs: Mapping[str, Any] | None = None) -> None:
    """Raise ``TypeError`` naming the mistake if ``model``/``example`` cannot be compiled as given."""
    forward = _check_model(model)
    args = () if example is None and kwargs else _check_example(example)
    _check_arity(type(model).__name__, forward, args, dict(kwargs or {}))


def _check_model(model: Any) -> inspect.Signature:
    if not isinstance(model, torch.nn.Module):
        what = "a function" if inspect.isfunction(model) or inspect.ismethod(model) else type(model).__name__
        raise TypeError(f"dycl.compile takes an nn.Module, got {what}: wrap the code in a module whose forward() "
                        "calls it (class Net(nn.Module): def forward(self, x): return f(x))")
    if isinstance(model, torch.jit.ScriptModule):
        raise TypeError(f"{type(model).__name__} is a TorchScript module: dycl reads Python source, so compile "
                        "the original nn.Module instead of its torch.jit.script/trace result")
    forward = type(model).forward
    if "forward" in vars(model):  # set on the instance: resolved (and checked) as Python calls it
        return inspect.signature(model.forward)
    if forward is torch.nn.Module.forward:
        raise TypeError(f"{type(model).__name__} does not define forward(): dycl compiles the forward() of an "
                        "nn.Module")
    if not inspect.isfunction(forward) and not hasattr(forward, "__wrapped__"):
        raise TypeError(f"{type(model).__name__}.forward is {type(forward).__name__}, not a Python function: dycl "
                        "compiles forward() from its source")
    return inspect.signature(model.forward)


def _check_example(example: Any) -> tuple[Any, ...]:
    hint = "pass a tensor, or a tuple of tensors for a forward() with several inputs"
    if isinstance(example, np.ndarray):
        raise TypeError(f"the example input is a numpy array: pass torch.from_numpy(array) ({hint})")
    if isinstance(example, list):
        raise TypeError(f"the example input is a list: pass a tuple, tuple(example) ({hint}); a forward() that "
                        "takes one list argument needs a tuple around it: (example,)")
    if isinstance(example, dict):
        raise TypeError(f"the example input is a dict: {hint} (keyword arguments go in kwargs=)")
    if not isinstance(example, (torch.Tensor, tuple)):
        raise TypeError(f"the example input is {type(example).__name__}: {hint}")
    args = positional_arguments(example)
    for position, value in enumerate(args):
        if isinstance(value, np.ndarray):
            raise TypeError(f"example argument {position} is a numpy array: pass torch.from_numpy(array)")
    return args


def _check_arity(name: str, forward: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    params = list(forward.parameters.values())
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        positional_max = None
    else:
        positional_max = sum(p.kind in _POSITIONAL for p in params)
    required = [p.name for p in params if p.kind in _POSITIONAL and p.default is inspect.Parameter.empty]
    missing = [p for p in required[len(args):] if p not in kwargs]
    shown = f"{name}.forward({', '.join(p.name for p in params if p.kind in _POSITIONAL)})"
    if missing:
        wanted = ", ".join(required)
        raise TypeError(f"{shown} needs {len(required)} input{'s' * (len(required) != 1)} but the example gives "
                        f"{len(args)} (missing {', '.join(repr(m) for m in missing)}): pass a tuple "
                        f"({wanted}{',' * (len(required) == 1)}) as the example")
    if positional_max is not None and len(args) > positional_max:
        raise TypeError(f"{shown} takes {positional_max} input{'s' * (positional_max != 1)} but the example gives "
                        f"{len(args)}: a tuple example is unpacked into forward()'s parameters; to pass one tuple "
                        "argument, wrap it: (example,)")


__all__ = ["validate"]
