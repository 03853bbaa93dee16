"""Find, parse and annotate the Python source of a function."""

from __future__ import annotations

import inspect
import textwrap
import types
from dataclasses import dataclass
from typing import Any

import libcst as cst
from dycl.rewriter.decorators import undecorate
from dycl.rewriter.errors import SourceLocation, UnsupportedError
from dycl.rewriter.higher_order import calls_higher_order, desugar_higher_order
from dycl.rewriter.lambdas import lambda_source
from dycl.rewriter.locations import LocationTable, annotate_locations
from dycl.rewriter.null_context import splice_null_contexts
from dycl.rewriter.try_blocks import splice_try
from dycl.rewriter.walrus import hoist_named_expressions


@dataclass(frozen=True)
class ParsedFunction:
    """A function's definition as libcst, each statement stamped with its file:line."""

    function: types.FunctionType
    definition: cst.FunctionDef
    location: SourceLocation
    higher_order: bool = False  # it called torch.cond/map (``rewriter.higher_order``)

    @property
    def globals(self) -> dict[str, Any]:
        return self.function.__globals__


def _where(obj: Any) -> SourceLocation | None:
    code = getattr(obj, "__code__", None)
    if code is None:
        return None
    return SourceLocation(code.co_filename, code.co_firstlineno)


def parse_function(function: Any, locations: LocationTable) -> ParsedFunction:
    """Parse ``function`` (a plain function or method, harmless decorators peeled);
    raise ``UnsupportedError`` when it has no Python source or a decorator whose
    code would be lost (``rewriter.decorators``)."""
    function = undecorate(getattr(function, "__func__", function))
    name = getattr(function, "__qualname__", repr(function))
    if not isinstance(function, types.FunctionType):
        raise UnsupportedError(f"{name}, which has no Python source (a builtin or C extension)", None,
                               "dycl compiles methods written in Python")
    captured = sorted(set(function.__code__.co_freevars) - {"__class__"})  # __class__: rewriter.super_calls
    if captured:
        raise UnsupportedError(f"{name}, a closure reading {', '.join(captured)} from an enclosing function",
                               _where(function), "store those values on the module in __init__, or pass them in")
    try:
        lines, first_line = inspect.getsourcelines(function)
        path = inspect.getsourcefile(function) or function.__code__.co_filename
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
    definition = splice_try(definition, locations)
    definition = hoist_named_expressions(definition, locations)
    higher_order = calls_higher_order(definition, function.__globals__)
    definition = desugar_higher_order(definition, function.__globals__, locations)
    definition = splice_null_contexts(definition, function.__globals__)
    return ParsedFunction(function, definition, SourceLocation(path, first_line), higher_order)
