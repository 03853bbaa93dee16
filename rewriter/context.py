"""The state the rewriter's passes share for one ``rewrite`` call.

``RewriteContext`` is created once per ``rewrite`` and handed to every pass;
what is particular to one function body (its module index, static flow and
entry facts) travels separately, in ``pipeline.FunctionUnit``. Its mutable
parts are the fresh-name supply, the global table, provenance, the call
stack (for recursion detection) and the named memo tables in
``RewriteCaches``; each table only ever gains entries, so a pass never
sees a fact that a later pass withdraws.
"""

from __future__ import annotations

import builtins
import types
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import libcst as cst
import torch
from dycl.rewriter.config_reads import ConfigReads
from dycl.rewriter.errors import SourceLocation, UnsupportedError
from dycl.rewriter.locations import LocationTable
from dycl.rewriter.names import Namespace
from dycl.rewriter.state_table import StateTable
from dycl.rewriter.user_code import is_user_code
from dycl.rewriter.values import FreshContainers, Static

if TYPE_CHECKING:
    from dycl.rewriter.callees import CachedCallee, CalleeKey, SyntaxFacts
    from dycl.rewriter.source import ParsedFunction

#: A callee being rewritten, as its cache key (``callees.CalleeKey``: the function first,
#: then what its rewrite depends on): a frame on the call stack.
Frame = tuple
#: A function and what its rewrite depends on about its receiver (``callees._receiver_key``).
ReceiverKey = tuple[types.FunctionType, object]


class GlobalTable:
    """The global names the rewritten function refers to, and what they denote.

    Code inlined from another module may use a global name that means something
    else in the root function's module; such a name is renamed (``F_1``) so that
    one table serves the whole rewritten function.
    """

    def __init__(self, namespace: Namespace) -> None:
        self.namespace = namespace
        self.objects: dict[str, Any] = {}
        self.introduced: set[str] = set()

    def register_root(self, name: str, obj: Any) -> None:
        self.objects[name] = obj

    def introduce(self, base: str, obj: Any) -> Static:
        """A fresh global name for ``obj``, which a pass writes into the code (``Parent`` in
        ``Parent.forward(self, x)``): it denotes ``obj`` in every function, since no user
        name can be fresh."""
        name = next((n for n in sorted(self.introduced) if self.objects[n] is obj), None) or self.namespace.fresh(base)
        self.objects[name] = obj
        self.introduced.add(name)
        return Static(obj, cst.Name(name))

    def resolve(self, name: str, fn_globals: dict[str, Any]) -> Static | None:
        """What global ``name`` denotes in a function whose globals are ``fn_globals``."""
        if name in self.introduced:
            return Static(self.objects[name], cst.Name(name))
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
class RewriteCaches:
    """Memo tables of one ``rewrite`` call (entries are added, never changed).

    - ``parsed``: a user function → its parsed, checked source.
    - ``syntax_facts``: a user function → its calls and locals when its source
      has no control flow syntax, else None (``callees.branch_free``).
    - ``branch_free``: a function and its receiver's fingerprint → whether calling it
      provably never branches on data.
    - ``callees``: a callee specialised to its static arguments → its rewritten
      body, or None when the call is kept (``callees.rewrite_callee``).
    - ``fingerprints``: ``id(module)`` → its structural fingerprint (``values.fingerprint``).
    """

    parsed: dict[types.FunctionType, ParsedFunction] = field(default_factory=dict)
    syntax_facts: dict[types.FunctionType, SyntaxFacts | None] = field(default_factory=dict)
    branch_free: dict[ReceiverKey, bool] = field(default_factory=dict)
    callees: dict[CalleeKey, CachedCallee | None] = field(default_factory=dict)
    fingerprints: dict[int, tuple] = field(default_factory=dict)


@dataclass
class RewriteContext:
    """Shared by every pass of one ``rewrite`` call: the model, the namespace
    of generated names, provenance, the global table, the containers the
    rewrite created (``fresh``), the call stack and the caches; with
    ``debug``, the source after every pass (``trace``: pass, function, source)."""

    model: torch.nn.Module
    namespace: Namespace
    locations: LocationTable
    globals: GlobalTable
    call_stack: list[Frame] = field(default_factory=list)
    caches: RewriteCaches = field(default_factory=RewriteCaches)
    fresh: FreshContainers = field(default_factory=FreshContainers)
    state: StateTable = field(default_factory=StateTable)  # module state forward() writes (rewriter.state_slots)
    config_reads: ConfigReads = field(default_factory=ConfigReads)  # the modules' Python values read (folded)
    debug: bool = False
    trace: list[tuple[str, str, str]] = field(default_factory=list)
    #: library functions (their code) rewritten like user code: they decide on data (dycl.model.library_decisions)
    followed: frozenset[types.CodeType] = frozenset()
    #: ids of the modules whose hooks are written out as code at their calls (rewriter.hook_effects)
    written_hooks: frozenset[int] = frozenset()
    #: the root's tensor inputs (by name in the rewritten function): the example's size per dim where
    #: the compiled model checks it on every call, None where the dim is symbolic (rewriter.tensor_rows)
    input_sizes: dict[str, tuple[int | None, ...]] = field(default_factory=dict)

    def rewrites(self, function: object) -> bool:
        """Whether calls of ``function`` are looked into: user code, or library code that is followed."""
        code = getattr(function, "__code__", None)
        return (code is not None and code in self.followed) or is_user_code(function)

    def record(self, pass_name: str, function: types.FunctionType, body: list) -> None:
        """With ``debug``, keep the source of ``function``'s body after ``pass_name``."""
        if self.debug:
            source = cst.Module(body=body).code
            self.trace.append((pass_name, function.__qualname__, source))

    def error(self, construct: str, stmt: cst.CSTNode | None, hint: str = "",
              location: SourceLocation | None = None) -> UnsupportedError:
        return UnsupportedError(construct, location or self.locations.resolve(stmt), hint)
