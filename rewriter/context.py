"""The state the rewriter's passes share for one ``rewrite`` call."""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from typing import Any

import libcst as cst
import torch
from dycl.rewriter.errors import SourceLocation, UnsupportedError
from dycl.rewriter.locations import LocationTable
from dycl.rewriter.names import Namespace
from dycl.rewriter.values import FreshContainers, ModuleIndex, Static


class GlobalTable:
    """The global names the rewritten function refers to, and what they denote.

    Code inlined from another module may use a global name that means something
    else in the root function's module; such a name is renamed (``F_1``) so that
    one table serves the whole rewritten function.
    """

    def __init__(self, namespace: Namespace) -> None:
        self.namespace = namespace
        self.objects: dict[str, Any] = {}

    def register_root(self, name: str, obj: Any) -> None:
        self.objects[name] = obj

    def resolve(self, name: str, fn_globals: dict[str, Any]) -> Static | None:
        """What global ``name`` denotes in a function whose globals are ``fn_globals``."""
        if name in fn_globals:
            obj = fn_globals[name]
            return Static(obj, cst.Name(self._name_for(name, obj)))
        if hasattr(builtins, name) and name not in self.objects:
            return Static(getattr(builtins, name), cst.Name(name))
        return None

    def _name_for(self, name: str, obj: Any) -> str:
        for registered, known in self.objects.items():
            if known is obj and (registered == name or registered.startswith(name + "_")):
                return registered
        if name not in self.objects and not self.namespace.is_taken(name):
            self.namespace.reserve(name)
            self.objects[name] = obj
            return name
        fresh = self.namespace.fresh(name)
        self.objects[fresh] = obj
        return fresh


@dataclass
class RewriteContext:
    """Shared by every pass of one ``rewrite`` call: the model, the module index,
    the namespace of generated names, provenance and the call stack (for
    recursion detection)."""

    model: torch.nn.Module
    index: ModuleIndex
    namespace: Namespace
    locations: LocationTable
    globals: GlobalTable
    call_stack: list[Any] = field(default_factory=list)
    parsed: dict[Any, Any] = field(default_factory=dict)
    callee_cache: dict[Any, Any] = field(default_factory=dict)
    branch_free: dict[Any, bool] = field(default_factory=dict)
    syntax_facts: dict[Any, Any] = field(default_factory=dict)
    fingerprints: dict[int, tuple] = field(default_factory=dict)
    fresh: FreshContainers = field(default_factory=FreshContainers)
    debug: bool = False
    trace: list[tuple[str, str, str]] = field(default_factory=list)

    def record(self, pass_name: str, parsed: Any, body: list) -> None:
        """With ``debug``, keep the source after each pass: (pass, function, source)."""
        if self.debug:
            source = cst.Module(body=body).code
            self.trace.append((pass_name, parsed.function.__qualname__, source))

    def error(self, construct: str, stmt: cst.CSTNode | None, hint: str = "",
              location: SourceLocation | None = None) -> UnsupportedError:
        return UnsupportedError(construct, location or self.locations.resolve(stmt), hint)
