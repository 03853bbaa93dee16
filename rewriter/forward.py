"""Which function ``module(x)`` runs: ``forward`` looked up as Python looks it up.

``nn.Module.__call__`` calls ``self.forward``, so an instance attribute wins
over the class's method: ``self.forward = self.early_exit`` in ``__init__``
(how the DyCL authors' SDNs switch inference modes), a bound method of another
module, or a ``functools.partial`` of a method with keyword arguments.

Guarantees: ``resolve_method`` returns the Python function that runs, the
object bound to its first parameter and the keyword arguments a partial binds;
anything else stored on the instance (a plain function, which Python calls
without ``self``; a partial with positional arguments; a builtin) raises
``UnsupportedError`` instead of silently compiling the class's method.
"""

from __future__ import annotations

import functools
import inspect
import types
from dataclasses import dataclass, field
from typing import Any

import torch
from dycl.rewriter.errors import SourceLocation, UnsupportedError
from dycl.rewriter.values import is_literal


@dataclass(frozen=True)
class ResolvedMethod:
    """``function(owner, *args, **keywords, **call_keywords)`` is what calling the method runs."""

    function: Any
    owner: Any
    keywords: dict[str, Any] = field(default_factory=dict)


def _init_location(module: Any) -> SourceLocation | None:
    code = getattr(getattr(type(module), "__init__", None), "__code__", None)
    return SourceLocation(code.co_filename, code.co_firstlineno) if code is not None else None


def resolve_method(module: torch.nn.Module, method: str = "forward") -> ResolvedMethod:
    """What ``getattr(module, method)(...)`` calls; raises ``UnsupportedError`` for what dycl cannot follow."""
    if method not in vars(module):
        function = getattr(type(module), method, None)
        if function is None:
            raise UnsupportedError(f"{type(module).__qualname__}.{method}, which does not exist", None)
        if not isinstance(function, types.FunctionType) and hasattr(function, "__wrapped__"):  # a class-based
            # decorator's instance (functools.update_wrapper), compiled as a call of it (rewriter.decorated_entry)
            function = _bound_object(module, method)
        return ResolvedMethod(function, module)
    attribute = vars(module)[method]
    keywords: dict[str, Any] = {}
    where = f"{type(module).__qualname__}.{method} (set on the instance)"
    if _decorator_bound(attribute):  # self.forward = self._infer, _infer decorated by a class
        return ResolvedMethod(attribute.func, attribute.args[0])
    while isinstance(attribute, functools.partial):
        if attribute.args:
            raise UnsupportedError(f"{where}: a functools.partial with positional arguments", _init_location(module),
                                   "bind the arguments by keyword: functools.partial(self.method, name=value)")
        keywords = {**attribute.keywords, **keywords}
        attribute = attribute.func
    if isinstance(attribute, types.MethodType) and isinstance(attribute.__self__, torch.nn.Module):
        return ResolvedMethod(attribute.__func__, attribute.__self__, keywords)
    raise UnsupportedError(f"{where}: {attribute!r:.60}, which is not a method of a module",
                           _init_location(module),
                           "assign a bound method, e.g. self.forward = self.early_exit (Python calls a plain "
                           "function stored on the instance without self)")


def refuse_overridden_call(module: torch.nn.Module) -> None:
    """Raise ``UnsupportedError`` at the definition where ``module``'s class overrides ``__call__``:
    calling the module runs that, not ``nn.Module.__call__``'s hooks-and-``forward`` that dycl compiles
    from ``forward`` (torch's own classes, such as ``fx.GraphModule``, keep its meaning and pass)."""
    owner = next(base for base in type(module).__mro__ if "__call__" in vars(base))
    if owner is torch.nn.Module or owner.__module__.startswith("torch."):
        return
    code = getattr(inspect.unwrap(vars(owner)["__call__"]), "__code__", None)
    where = SourceLocation(code.co_filename, code.co_firstlineno) if code is not None else None
    raise UnsupportedError(f"{owner.__qualname__}.__call__, which overrides nn.Module.__call__ (calling the module "
                           "runs it instead of the hooks and forward that dycl compiles)", where,
                           "do its work in forward (or in a forward pre-hook or hook) and leave __call__ to nn.Module")


def _decorator_bound(attribute: Any) -> bool:
    """Whether ``attribute`` is ``functools.partial(decorator, module)``, what a class-based decorator's
    ``__get__`` gives for a module's method (``_bound_object``): calling the decorator with the module first."""
    return (isinstance(attribute, functools.partial) and len(attribute.args) == 1 and not attribute.keywords
            and isinstance(attribute.args[0], torch.nn.Module) and hasattr(attribute.func, "__wrapped__")
            and not isinstance(attribute.func, types.FunctionType))


def _bound_object(module: torch.nn.Module, method: str) -> Any:
    """The object stored as the class's ``method`` (a class-based decorator's instance), when
    looking it up on ``module`` binds the module as its first argument, as a method's ``__get__``
    does (``functools.partial(obj, module)`` or ``types.MethodType(obj, module)``): calling it with
    the module first is then what ``module.method(...)`` runs. Else ``UnsupportedError``."""
    stored = inspect.getattr_static(type(module), method)
    bound = getattr(module, method)
    if isinstance(bound, functools.partial) and bound.func is stored and len(bound.args) == 1 \
            and bound.args[0] is module and not bound.keywords:
        return stored
    if isinstance(bound, types.MethodType) and bound.__func__ is stored and bound.__self__ is module:
        return stored
    code = getattr(inspect.unwrap(stored), "__code__", None)
    raise UnsupportedError(
        f"{type(module).__qualname__}.{method}, a {type(stored).__qualname__} object that looking it up on the "
        f"module turns into {type(bound).__qualname__}", SourceLocation(code.co_filename, code.co_firstlineno)
        if code is not None else None,
        "bind the module as a method does: return functools.partial(self, obj) or types.MethodType(self, obj) "
        "from the decorator's __get__")


def signature_of(resolved: ResolvedMethod, function: Any = None,
                 location: SourceLocation | None = None) -> inspect.Signature:
    """The signature of ``function`` (default: the resolved function; pass the
    undecorated one) with the keywords a ``functools.partial`` forward binds as
    defaults; its first parameter is the receiver."""
    function = resolved.function if function is None else function
    signature = inspect.signature(function)
    if not resolved.keywords:
        return signature
    for name, value in resolved.keywords.items():
        if not is_literal(value):
            raise UnsupportedError(f"a functools.partial forward binding {name}={value!r:.40}", location,
                                   "bind only numbers, strings, booleans or None with partial")
    first, *_ = signature.parameters.values()
    bound = inspect.signature(functools.partial(function, None, **resolved.keywords))
    return signature.replace(parameters=[first, *bound.parameters.values()])
