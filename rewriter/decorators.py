"""Decorated user functions: peel wrappers that provably change nothing, refuse the rest.

A decorator made with ``functools.wraps`` leaves the wrapped function in
``__wrapped__``; compiling that function instead of the wrapper would drop the
wrapper's code (``@add_one`` would silently stop adding one). A wrapper layer
is peeled only when calling it is, for inference, the same as calling the
function it wraps:

- torch's grad-mode decorators (``@torch.no_grad()``, ``@torch.inference_mode()``,
  ``@torch.enable_grad()``, ``@torch.set_grad_enabled(...)``): they only switch
  autograd recording, and dycl compiles inference without autograd. (Other
  context decorators, ``torch.autocast`` included, change the computation.)
- a pure forwarding wrapper whose whole body is ``return f(*args, **kwargs)``
  with exactly its own parameters (a docstring aside).

Any other layer raises ``UnsupportedError`` naming the decorator and its line, except
where the caller compiles wrappers as closures (``undecorate(..., closures=True)``: a
helper's decorator, inlined like any call).
A decorator that returns the function itself (``torch.jit.unused``, a registry)
leaves no layer and needs nothing.
"""

from __future__ import annotations

import inspect
import textwrap
import types
from typing import Any

import libcst as cst
import torch
from dycl.rewriter.errors import SourceLocation, UnsupportedError
from dycl.rewriter.user_code import in_library

_GRAD_MODES = (torch.no_grad, torch.enable_grad, torch.inference_mode, torch.set_grad_enabled)


def _closure(function: types.FunctionType) -> dict[str, Any]:
    cells = function.__closure__ or ()
    values = {}
    for name, cell in zip(function.__code__.co_freevars, cells):
        try:
            values[name] = cell.cell_contents
        except ValueError:  # an empty cell
            continue
    return values


def _is_grad_mode_wrapper(function: types.FunctionType) -> bool:
    code = function.__code__
    if code.co_name != "decorate_context" or not code.co_filename.replace("\\", "/").endswith(
            "torch/utils/_contextlib.py"):
        return False
    factory = _closure(function).get("ctx_factory")
    return isinstance(getattr(factory, "__self__", None), _GRAD_MODES)


def _is_forwarding_wrapper(function: types.FunctionType) -> bool:
    """``def w(*a, **k): return f(*a, **k)`` where ``f`` is ``function.__wrapped__``."""
    try:
        source = textwrap.dedent(inspect.getsource(function.__code__))
        definition = cst.parse_module(source).body[0]
    except (OSError, TypeError, IndexError, cst.ParserSyntaxError):
        return False
    if not isinstance(definition, cst.FunctionDef):
        return False
    params = definition.params
    if params.params or params.posonly_params or params.kwonly_params or not isinstance(params.star_arg, cst.Param) \
            or params.star_kwarg is None:
        return False
    body = list(definition.body.body)
    if body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Expr) and \
            isinstance(body[0].body[0].value, cst.SimpleString):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or len(body[0].body) != 1:
        return False
    returned = body[0].body[0]
    if not isinstance(returned, cst.Return) or not isinstance(returned.value, cst.Call):
        return False
    call = returned.value
    if not isinstance(call.func, cst.Name) or _closure(function).get(call.func.value) is not function.__wrapped__:
        return False
    star, stars = params.star_arg.name.value, params.star_kwarg.name.value
    return (len(call.args) == 2 and call.args[0].star == "*" and call.args[1].star == "**"
            and isinstance(call.args[0].value, cst.Name) and call.args[0].value.value == star
            and isinstance(call.args[1].value, cst.Name) and call.args[1].value.value == stars)


def _decorator_site(layer: types.FunctionType, inner: types.FunctionType) -> tuple[str, SourceLocation | None]:
    """The decorator (as written) that made ``layer`` around ``inner``, and its line."""
    qualname = getattr(layer.__code__, "co_qualname", layer.__code__.co_name)
    maker = qualname.split(".<locals>")[0].split(".")[-1]
    try:
        lines, first = inspect.getsourcelines(inner)
        definition = cst.parse_module(textwrap.dedent("".join(lines))).body[0]
    except (OSError, TypeError, IndexError, cst.ParserSyntaxError):
        return f"@{maker}", None
    if not isinstance(definition, cst.FunctionDef) or not definition.decorators:
        return f"@{maker}", None
    written = ["@" + cst.Module([]).code_for_node(d.decorator) for d in definition.decorators]
    starts = [i for i, text in enumerate(lines) if text.lstrip().startswith("@")]
    chosen = next((i for i, text in enumerate(written) if maker in text), 0)
    offset = starts[chosen] if chosen < len(starts) else 0
    return written[chosen], SourceLocation(inner.__code__.co_filename, first + offset)


def _library_code(function: types.FunctionType) -> bool:
    """Torch's or an installed package's wrapper (``torch.autocast``'s changes the dtypes the
    traced graph computes in: not a closure to compile)."""
    if (getattr(function, "__module__", "") or "").split(".")[0] in ("torch", "functools", "contextlib"):
        return True
    return in_library(function.__code__.co_filename)


def _has_source(function: types.FunctionType) -> bool:
    try:
        inspect.getsourcelines(function.__code__)  # not the function: inspect would follow __wrapped__
    except (OSError, TypeError):
        return False
    return True


def undecorate(function: Any, closures: bool = False, followed: frozenset[types.CodeType] = frozenset()) -> Any:
    """``function`` without its harmless wrapper layers; raises ``UnsupportedError`` at
    the first layer that may change the result. Not-wrapped functions come back as is.

    With ``closures``, such a layer that has Python source is returned instead: the
    wrapper is compiled as the closure it is (its body, with the function it wraps and
    the decorator's other arguments read from its cells, ``ParsedFunction.globals``),
    so its code is kept, not dropped. A library's wrapper whose code is in ``followed``
    (it leads to a data-dependent decision: ``dycl.model.library_decisions``) is compiled so too."""
    current = function
    while isinstance(current, types.FunctionType) and hasattr(current, "__wrapped__"):
        if not (_is_grad_mode_wrapper(current) or _is_forwarding_wrapper(current)):
            if closures and _has_source(current) and (current.__code__ in followed or not _library_code(current)):
                return current
            inner = inspect.unwrap(current)
            decorator, location = _decorator_site(current, inner)
            raise UnsupportedError(
                f"a function decorated with {decorator} ({getattr(inner, '__qualname__', inner)!r:.60})", location,
                "dycl compiles the function's own source, which would silently drop the decorator's code: "
                "apply its effect inside the function, or remove the decorator "
                "(torch.no_grad()/inference_mode() and pure forwarding wrappers are accepted)")
        current = current.__wrapped__
    return current
