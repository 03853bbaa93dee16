"""Find, parse and annotate the Python source of a function."""

from __future__ import annotations

import inspect
import textwrap
import types
from dataclasses import dataclass, field
from typing import Any

import libcst as cst
from dycl.rewriter.decorators import undecorate
from dycl.rewriter.errors import SourceLocation, UnsupportedError
from dycl.rewriter.higher_order import calls_higher_order, desugar_higher_order
from dycl.rewriter.lambdas import lambda_source
from dycl.rewriter.local_imports import lower_local_imports
from dycl.rewriter.locations import LocationTable, annotate_locations
from dycl.rewriter.match_statements import lower_match_statements
from dycl.rewriter.null_context import splice_null_contexts
from dycl.rewriter.scoped_bindings import fold_scoped_bindings
from dycl.rewriter.try_blocks import splice_try
from dycl.rewriter.walrus import hoist_named_expressions


@dataclass(frozen=True)
class ParsedFunction:
    """A function's definition as libcst, each statement stamped with its file:line."""

    function: types.FunctionType
    definition: cst.FunctionDef
    location: SourceLocation
    higher_order: bool = False  # it called torch.cond/map (``rewriter.higher_order``)
    imports: dict[str, Any] = field(default_factory=dict)  # lowered local imports (``rewriter.local_imports``)
    scoped: tuple[Any, ...] = ()  # context variables whose binding was folded (``rewriter.scoped_bindings``)

    @property
    def globals(self) -> dict[str, Any]:
        """The names the source reads from outside: the module's globals, and for a closure
        (a decorator's wrapper) its cells, frozen at compile time as globals are; the
        modules its local imports bind."""
        cells = closure_values(self.function)
        if not cells and not self.imports:
            return self.function.__globals__
        return {**self.function.__globals__, **cells, **self.imports}


def _where(obj: Any) -> SourceLocation | None:
    code = getattr(obj, "__code__", None)
    if code is None:
        return None
    return SourceLocation(code.co_filename, code.co_firstlineno)


def closure_values(function: types.FunctionType) -> dict[str, Any]:
    """The values in ``function``'s cells by name (``__class__`` aside: ``rewriter.super_calls``)."""
    values = {}
    for name, cell in zip(function.__code__.co_freevars, function.__closure__ or ()):
        if name != "__class__":
            try:
                values[name] = cell.cell_contents
            except ValueError:  # an empty cell: refused below
                continue
    return values


def parse_function(function: Any, locations: LocationTable, closures: bool = False,
                   followed: frozenset = frozenset()) -> ParsedFunction:
    """Parse ``function`` (a plain function or method, harmless decorators peeled);
    raise ``UnsupportedError`` when it has no Python source or a decorator whose
    code would be lost (``rewriter.decorators``). With ``closures`` (a callee), a
    closure (a decorator's wrapper, a lambda made in ``__init__``) is parsed reading its
    cells as globals: frozen at compile time, as globals are. ``followed``: library wrappers
    compiled as closures too (``rewriter.decorators.undecorate``)."""
    function = undecorate(getattr(function, "__func__", function), closures=closures, followed=followed)
    name = getattr(function, "__qualname__", repr(function))
    if not isinstance(function, types.FunctionType):
        raise UnsupportedError(f"{name}, which has no Python source (a builtin or C extension)", None,
                               "dycl compiles methods written in Python")
    captured = sorted(set(function.__code__.co_freevars) - {"__class__"})  # __class__: rewriter.super_calls
    if captured and not (closures and set(closure_values(function)) == set(captured)):
        raise UnsupportedError(f"{name}, a closure reading {', '.join(captured)} from an enclosing function",
                               _where(function), "store those values on the module in __init__, or pass them in")
    try:
        # the code object's: inspect follows a function's __wrapped__ to the function a wrapper wraps
        lines, first_line = inspect.getsourcelines(function.__code__)
        path = inspect.getsourcefile(function.__code__) or function.__code__.co_filename
    except (OSError, TypeError) as exc:
        raise UnsupportedError(f"{name}, whose source code cannot be found ({exc})", _where(function),
                               "define the model in a .py file (or a notebook cell) that Python can read back"
                               ) from None
    source = textwrap.dedent("".join(lines))
    if function.__name__ == "<lambda>":  # a lambda kept as a value: the def it stands for
        source, first_line = lambda_source(function, lines, _where(function))
    module = cst.parse_module(source)
    if sum(isinstance(s, cst.FunctionDef) for s in module.body) != 1:
        raise UnsupportedError(f"{name}, whose source could not be isolated", _where(function))
    annotated = annotate_locations(module, source, locations.label_for(path), first_line)
    definition = next(s for s in annotated.body if isinstance(s, cst.FunctionDef))
    definition, scoped = fold_scoped_bindings(definition, {**function.__globals__, **closure_values(function)})
    definition = splice_try(definition, locations)
    definition = lower_match_statements(definition)
    definition = hoist_named_expressions(definition, locations)
    higher_order = calls_higher_order(definition, function.__globals__)
    definition = desugar_higher_order(definition, function.__globals__, locations)
    definition = splice_null_contexts(definition, function.__globals__)
    definition, imports = lower_local_imports(definition, function)
    return ParsedFunction(function, definition, SourceLocation(path, first_line), higher_order, imports, scoped)
