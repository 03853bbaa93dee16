"""A decorated root ``forward``: compile the call of the decorated function, wrapper and all.

``rewriter.source.parse_function`` parses a function's own source, so a root ``forward``
behind a decorator that may change its result (``@add_one``, transformers'
``@can_return_tuple``) would lose the wrapper's code and is refused there. A callee's
decorator is compiled as the closure it is (``rewriter.inline``, ``rewriter.decorators``).
``decorated_entry`` makes the root one a callee: it gives the rewriter a small generated
method with the wrapped function's parameters that calls the decorated function as the
example called the model,

    def forward(self, x, mask=_dycl_default_mask):
        return Net_forward(self, x, mask=mask)

(``Net_forward``, the class's name and the method's, is the decorated function, so that a
message quoting the call reads as the user's code; positional arguments positionally, keyword
arguments by keyword, the ones the example left out left out, the keywords a
``functools.partial`` forward binds by keyword), so the wrapper sees the ``args`` and
``kwargs`` eager gives it, and the ``Inline`` pass inlines it with the same passes as any
other call (or keeps it as a call the exporter traces, when nothing in it branches on data).

Assumes: ``signature`` is the wrapped function's, partial keywords applied as defaults;
``positional`` is how many of the example's arguments were positional (None: a direct
``rewriter.rewrite`` call, whose example arguments are passed by keyword).
Guarantees: a forward whose wrappers change nothing (``rewriter.decorators``) is returned as
is; the generated method has source (``linecache``) and reads only the decorated function
and the defaults from its globals.
"""

from __future__ import annotations

import inspect
import linecache
from typing import Any

import libcst as cst
from dycl.rewriter.decorators import undecorate
from dycl.rewriter.errors import SourceLocation, UnsupportedError
from dycl.rewriter.forward import ResolvedMethod
from dycl.rewriter.locations import LocationTable, location_comment

_P = inspect.Parameter


def needs_entry(resolved: ResolvedMethod) -> bool:
    """Whether ``resolved``'s function has a wrapper layer whose code compiling its source would drop,
    or is itself a closure (a wrapper made without ``functools.wraps``, reading the function it wraps)."""
    if not inspect.isfunction(resolved.function) and hasattr(resolved.function, "__wrapped__"):
        return True  # a class-based decorator's instance (rewriter.forward)
    try:
        inner = undecorate(resolved.function)
    except UnsupportedError:
        return True
    code = getattr(inner, "__code__", None)
    return code is not None and bool(set(code.co_freevars) - {"__class__"})


def entry_location(resolved: ResolvedMethod) -> SourceLocation | None:
    """Where the decorated method is written (its first decorator's line): the generated entry's
    statements are reported there, since its own source is no file the user can open."""
    code = getattr(inspect.unwrap(resolved.function), "__code__", None)
    if code is None:
        return None
    try:  # a decorated function's code starts at its first decorator
        _, first = inspect.getsourcelines(code)
        path = inspect.getsourcefile(code) or code.co_filename
    except (OSError, TypeError):
        return None
    return SourceLocation(path, first)


class _Relocate(cst.CSTTransformer):
    """Every location comment pointing at ``label``:``line``."""

    def __init__(self, label: str, line: int) -> None:
        super().__init__()
        self.comment = location_comment(label, line)

    def leave_Comment(self, original: cst.Comment, updated: cst.Comment) -> cst.Comment:
        return self.comment if updated.value.startswith("# ") else updated


def relocated(definition: cst.FunctionDef, locations: LocationTable, where: SourceLocation) -> cst.FunctionDef:
    """The generated entry ``definition`` with its statements reported at ``where``."""
    return definition.visit(_Relocate(locations.label_for(where.path), where.line))


def _argument(parameter: inspect.Parameter, index: int, positional: int | None) -> str:
    """How the generated call passes ``parameter`` (the ``index``-th after the receiver)."""
    name = parameter.name
    if parameter.kind is _P.VAR_POSITIONAL:
        return f"*{name}"
    if parameter.kind is _P.VAR_KEYWORD:
        return f"**{name}"
    if parameter.kind is _P.POSITIONAL_ONLY or (positional is not None and index < positional
                                                and parameter.kind is _P.POSITIONAL_OR_KEYWORD):
        return name
    return f"{name}={name}"


def _header(parameters: list[inspect.Parameter], namespace: dict[str, Any]) -> list[str]:
    """The generated method's parameter list (defaults read from ``namespace``)."""
    header: list[str] = []
    for index, parameter in enumerate(parameters):
        text = parameter.name
        if parameter.kind is _P.VAR_POSITIONAL:
            text = f"*{text}"
        elif parameter.kind is _P.VAR_KEYWORD:
            text = f"**{text}"
        elif parameter.default is not _P.empty:
            namespace[f"_dycl_default_{parameter.name}"] = parameter.default
            text += f"=_dycl_default_{parameter.name}"
        if parameter.kind is _P.KEYWORD_ONLY and not any(h.startswith("*") for h in header):
            header.append("*")
        header.append(text)
        if parameter.kind is _P.POSITIONAL_ONLY and (index + 1 == len(parameters)
                                                     or parameters[index + 1].kind is not _P.POSITIONAL_ONLY):
            header.append("/")
    return header


def decorated_entry(model: Any, resolved: ResolvedMethod, signature: inspect.Signature,
                    example: dict[str, Any] | None, positional: int | None, name: str = "forward") -> ResolvedMethod:
    """``resolved`` when its wrappers change nothing, else the generated method ``name`` that calls it."""
    if not needs_entry(resolved):
        return resolved
    receiver, *parameters = signature.parameters.values()
    if receiver.kind not in (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD):
        code = inspect.unwrap(resolved.function).__code__
        raise UnsupportedError(f"{type(model).__qualname__}.{name} decorated with a wrapper whose signature hides "
                               f"forward's parameters ({name}{signature})",
                               SourceLocation(code.co_filename, code.co_firstlineno),
                               "decorate the wrapper with functools.wraps(fn), so that its signature is the method's "
                               "(or give the wrapper a self parameter: def wrapper(self, *args, **kwargs))")
    callee = f"{type(model).__name__}_{name}"
    while callee in {receiver.name, *(p.name for p in parameters)} or callee.startswith("_dycl_default_"):
        callee = f"_{callee}"
    namespace: dict[str, Any] = {"__name__": "dycl.rewriter.decorated_entry", callee: resolved.function}
    header = _header(parameters, namespace)
    passed = [p for p in parameters if (p.name in example if example is not None else p.default is _P.empty)
              or p.name in resolved.keywords]
    arguments = [_argument(p, parameters.index(p), positional if p.name not in resolved.keywords else 0)
                 for p in passed]
    source = (f"def {name}({', '.join([receiver.name, *header])}):\n"
              f"    return {callee}({', '.join([receiver.name, *arguments])})\n")
    filename = f"<dycl: calling the decorated {type(model).__qualname__}.{name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - our generated method only
    return ResolvedMethod(namespace[name], model)


__all__ = ["decorated_entry", "entry_location", "needs_entry", "relocated"]
