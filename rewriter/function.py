"""The result of rewriting: readable source, and a way to run it eagerly."""

from __future__ import annotations

import functools
import inspect
import linecache
from dataclasses import dataclass, field
from typing import Any

import torch
from dycl.rewriter.arguments import FlatInput
from dycl.rewriter.locations import LocationTable


@dataclass(frozen=True)
class RewrittenFunction:
    """A loop-free, constant-folded rewrite of one method of one model.

    ``source`` is a module holding one ``def``; every statement ends with a
    ``# file.py:line`` comment naming the user's line it came from.
    ``globals`` maps each global name the source uses to its object.
    ``signature`` is the rewritten function's: ``self``, one parameter per
    input (``inputs`` says which argument of the original ``forward()`` each one
    is), then the ``specialized`` parameters whose values were folded in (calling
    with another value raises ``ValueError``). ``fixed``, ``absent`` and
    ``variadic`` describe the rest of the example's call form
    (``rewriter.arguments.FlatParameters``); ``original_signature`` is forward()'s.
    """

    name: str
    qualname: str
    source: str
    globals: dict[str, Any]
    signature: inspect.Signature
    specialized: dict[str, Any]
    locations: LocationTable
    module_structure: tuple[tuple[str, str], ...]
    trace: list[tuple[str, str, str]] = field(default_factory=list, repr=False)
    inputs: tuple[FlatInput, ...] = ()
    fixed: tuple[tuple[str, int | str | None, Any], ...] = ()
    absent: tuple[str, ...] = ()
    variadic: dict[str, int | list[str]] = field(default_factory=dict)
    original_signature: inspect.Signature | None = None
    higher_order: bool = False  # the source called torch.cond/map: the original must never be traced

    @property
    def plain_source(self) -> str:
        """``source`` without the location comments."""
        return self.locations.strip(self.source)

    def compile(self):
        """The rewritten function as a Python function taking ``self`` first."""
        filename = f"<dycl-rewritten {self.qualname}>"
        linecache.cache[filename] = (len(self.source), None, self.source.splitlines(True), filename)
        namespace: dict[str, Any] = {"__builtins__": __builtins__, **self.globals}
        exec(compile(self.source, filename, "exec"), namespace)  # noqa: S102 - our generated code only
        return namespace[self.name]

    def bind(self, model: torch.nn.Module):
        """A callable with ``model.forward``'s arguments and return value that runs
        the rewritten function eagerly (under ``torch.no_grad()``)."""
        structure = _module_structure(model)
        if structure != self.module_structure:
            raise ValueError(f"{self.qualname} was rewritten for a model with a different module structure")
        function = self.compile()
        signature = self.signature

        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(model, *args, **kwargs)
            for name, expected in self.specialized.items():
                if name in bound.arguments and bound.arguments[name] is not expected and (
                    bound.arguments[name] != expected
                ):
                    raise ValueError(
                        f"argument {name!r} was specialized to {expected!r} when the model was rewritten; "
                        f"got {bound.arguments[name]!r}")
            with torch.no_grad():
                return function(model, *args, **kwargs)

        return call


def _module_structure(model: torch.nn.Module) -> tuple[tuple[str, str], ...]:
    return tuple((name, type(module).__qualname__) for name, module in model.named_modules())


module_structure = _module_structure
