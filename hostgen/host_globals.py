"""The globals a generated host reads, made available to it — or refused at compile time.

Host operations are copied from the rewritten ``forward()`` as text, so every
global name they read (``math`` in ``s = math.sqrt(n)``, a module-level helper
``_round_up(n, 8)``) must be defined in ``host.py`` too. ``host_prelude``
finds those names with ``symtable`` (the compiler's own view of which names a
function reads as globals) and writes a definition for each one the host can
hold without torch:

==================================  =================================================
the global is                       the host gets
==================================  =================================================
a standard-library or numpy module  ``import math`` / ``import numpy as np``
a standard-library function/class   ``from operator import mul as mul``
a builtin under another name        ``_max = max``
a literal (``EPS = 1e-5``)          ``EPS = 1e-05``
a plain Python function             its source, when it reads only such globals
                                    itself, has no closure, decorators or attribute
                                    reads (so it only does arithmetic on what it gets)
``functools.partial`` of the above  ``f = functools.partial(g, 2)`` (literal args)
a plain dataclass (a record)        a stand-in class (``hostgen.stand_ins``)
==================================  =================================================

Anything else (``torch``, a class, a tensor, a helper that calls torch) raises
``UnsupportedError`` naming the user's line that reads it. ``check_host_names``
then proves the result: every global read by every function in the host is a
module-level binding of the host or a builtin.

Assumed: ``globals`` maps each global name of the rewritten function to its
object. The user's line of a read comes from the emitter's line map (``hostgen.program``),
not from the host's text; a bare source (no line map) gets no line.
"""

from __future__ import annotations

import ast
import builtins
import functools
import hashlib
import importlib
import inspect
import json
import linecache
import pathlib
import symtable
import sys
import textwrap
import types
from typing import Any

import libcst as cst
import numpy as np
from dycl.hostgen.program import HostProgram
from dycl.hostgen.stand_ins import record_stand_in
from dycl.rewriter.errors import SourceLocation, UnsupportedError
from dycl.rewriter.local_access import access_roots, local_names
from dycl.rewriter.locations import LocationTable, set_location
from dycl.rewriter.values import is_literal

_STDLIB = frozenset(sys.stdlib_module_names) | {"numpy"}
_HINT = ("compute it inside forward() from tensors (so it runs in the compiled graph), or make it a "
         "literal, a standard-library call, or a plain Python function of numbers")


def host_prelude(program: HostProgram, globals_: dict[str, Any], locations: LocationTable | None = None) -> list[str]:
    """Module-level lines that define every global ``program`` (a host module)
    reads but does not define; raises ``UnsupportedError`` for one it cannot."""
    prelude = _Prelude(_module_bindings(program) | _MODULE_ATTRIBUTES)
    for name, line in sorted(_global_reads(program).items()):
        if line and (name in globals_ or name not in prelude.defined):
            prelude.define(name, globals_, _location_of(program, line, locations))
    return prelude.lines


def check_host_names(program: HostProgram | str, locations: LocationTable | None = None) -> None:
    """Prove that every function in ``program`` (or a bare source) reads only globals the module defines."""
    if isinstance(program, str):
        program = HostProgram(program, {}, "", 0)
    defined = _module_bindings(program) | _MODULE_ATTRIBUTES
    unbound = {name: line for name, line in _global_reads(program).items() if name not in defined}
    if unbound:
        name, line = min(unbound.items())
        raise UnsupportedError(f"a host operation that reads {name!r}, which the host does not define",
                               _location_of(program, line, locations), _HINT)


_TEMPLATE_MODULES = {"np": np, "json": json, "hashlib": hashlib, "linecache": linecache, "pathlib": pathlib}


# names every module has without binding them
_MODULE_ATTRIBUTES = frozenset({"__file__", "__name__", "__doc__", "__spec__", "__loader__", "__package__"})


@functools.lru_cache(maxsize=64)
def _part_scopes(part: str) -> tuple[frozenset[str], frozenset[str]]:
    """``(the names part binds at module level, the global names its functions read)``.

    A part is whole top-level statements, so a function's globals are the same in the
    part as in the module. Kept per text: the runtime modules every host copies (about
    1,400 lines, ``hostgen.template``) are analysed once per process, not twice per compile."""
    table = symtable.symtable(part, "host.py", "exec")
    reads: set[str] = set()
    stack = list(table.get_children())
    while stack:
        scope = stack.pop()
        stack.extend(scope.get_children())
        if scope.get_type() == "function":
            reads |= {s.get_name() for s in scope.get_symbols() if s.is_global() and s.is_referenced()}
    bound = frozenset(s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported())
    return bound, frozenset(reads)


def _module_bindings(program: HostProgram) -> set[str]:
    """The names ``program``'s module binds (assigned or imported at module level)."""
    return set().union(*(_part_scopes(part)[0] for part in program.segments))


def _global_reads(program: HostProgram) -> dict[str, int]:
    """Global name read inside a function of ``program`` (builtins aside) -> the first line of
    the first emitted statement with a user's line that reads it (0: none does)."""
    names = set().union(*(_part_scopes(part)[1] for part in program.segments))
    module_level = _module_bindings(program)
    names = {n for n in names if n in module_level or not hasattr(builtins, n)}
    statement_of = {line + k: line for line, entry in program.line_map.items() if entry.where
                    for k in range(entry.extra_lines + 1)}
    first = dict.fromkeys(names, 0)
    if not statement_of:
        return first
    shift = program.first_line - 1  # the method's line k is the host's line k + shift
    for node in ast.walk(ast.parse(program.method_source)):
        if isinstance(node, ast.Name) and node.id in first and node.lineno + shift in statement_of:
            line = statement_of[node.lineno + shift]
            first[node.id] = min(first[node.id] or line, line)
    return first


def _location_of(program: HostProgram, line: int, locations: LocationTable | None) -> SourceLocation | None:
    entry = program.line_map.get(line)
    if entry is None or not entry.where:
        return None
    stmt = set_location(cst.SimpleStatementLine([cst.Pass()]), cst.Comment(f"# {entry.where}"))
    return (locations or LocationTable()).resolve(stmt)


class _Prelude:
    """The definitions written so far, in dependency order; one object per host name."""

    def __init__(self, defined: set[str]) -> None:
        self.defined = set(defined)
        self.lines: list[str] = []
        self.objects: dict[str, Any] = {}

    def define(self, name: str, namespace: dict[str, Any], where: SourceLocation | None) -> None:
        if name not in namespace:
            raise UnsupportedError(f"a host operation that reads {name!r}, which is not defined", where, _HINT)
        value = namespace[name]
        if name in self.defined and name not in self.objects:
            if _TEMPLATE_MODULES.get(name) is not value:
                raise UnsupportedError(f"a host operation that reads the global {name!r}, a name the host "
                                       "program uses for itself", where, "rename the global")
            return
        if name in self.objects:
            if self.objects[name] is not value:
                raise UnsupportedError(f"two different globals named {name!r} in host operations", where,
                                       "rename one of them")
            return
        self.objects[name] = value
        text = self.definition(name, value, where)
        if text is None:
            what = f"module {value.__name__}" if isinstance(value, types.ModuleType) else type(value).__name__
            raise UnsupportedError(f"a host operation that needs {name!r} (a {what}), which cannot run without "
                                   "torch", where, _HINT)
        self.lines.append(text)
        self.defined.add(name)

    def definition(self, name: str, value: Any, where: SourceLocation | None) -> str | None:
        if isinstance(value, types.ModuleType):
            if value.__name__.split(".")[0] not in _STDLIB:
                return None
            return f"import {value.__name__}" if name == value.__name__ else f"import {value.__name__} as {name}"
        if is_literal(value) and not isinstance(value, (list, dict)):
            return f"{name} = {value!r}"
        if getattr(builtins, getattr(value, "__name__", ""), None) is value:
            return f"{name} = {value.__name__}"
        if isinstance(value, functools.partial):
            return self.partial(name, value, where)
        if isinstance(value, types.FunctionType) and value.__module__.split(".")[0] not in _STDLIB:
            return self.copied_function(name, value, where)
        if (stand_in := record_stand_in(name, value)) is not None:
            return stand_in
        module = getattr(value, "__module__", None) or ""
        qualname = getattr(value, "__qualname__", "")
        if module.split(".")[0] in _STDLIB and qualname.isidentifier():
            try:
                found = getattr(importlib.import_module(module), qualname, None)
            except ImportError:
                found = None
            if found is value:
                return f"from {module} import {qualname} as {name}"
        return None

    def partial(self, name: str, value: functools.partial, where: SourceLocation | None) -> str | None:
        if not all(is_literal(a) for a in (*value.args, *value.keywords.values())):
            return None
        inner = f"{name}_func"
        self.define(inner, {inner: value.func}, where)
        arguments = [repr(a) for a in value.args] + [f"{k}={v!r}" for k, v in value.keywords.items()]
        self.define("_functools", {"_functools": functools}, where)
        return f"{name} = _functools.partial({', '.join([inner, *arguments])})"

    def copied_function(self, name: str, function: types.FunctionType, where: SourceLocation | None) -> str | None:
        """The source of a plain helper of numbers, after the definitions of the globals it reads."""
        if function.__closure__ or function.__kwdefaults__ or not all(
                is_literal(d) for d in function.__defaults__ or ()):
            return None
        try:
            source = textwrap.dedent(inspect.getsource(function))
        except (OSError, TypeError):
            return None
        tree = ast.parse(source)
        definition = tree.body[0] if len(tree.body) == 1 else None
        if not isinstance(definition, ast.FunctionDef) or definition.decorator_list:
            return None
        nested = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.comprehension,
                  ast.Global, ast.Nonlocal, ast.Yield, ast.YieldFrom, ast.Await)
        if any(isinstance(node, nested) for node in ast.walk(definition) if node is not definition):
            return None
        local = local_names(definition)  # no nested scope (above): its arguments are the function's
        if any(not isinstance(root, ast.Name) or root.id in local for root in access_roots(definition)):
            return None  # on an argument it would act on a numpy array, not a tensor
        reads = {n.id for n in ast.walk(definition) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        for read in sorted(reads - local):
            if read in function.__globals__:
                try:
                    self.define(read, function.__globals__, where)
                except UnsupportedError:
                    return None  # the caller names the helper, not what it reads
            elif not hasattr(builtins, read):
                return None
        if definition.name != name:
            self.define(definition.name, {definition.name: function}, where)
            return f"{name} = {definition.name}"
        return source.rstrip()


__all__ = ["host_prelude", "check_host_names"]
