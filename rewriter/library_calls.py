"""Calls of an installed library's plain functions on literal arguments, evaluated at compile time.

Library code that dycl follows (``dycl.model.library_decisions``) calls small helpers of its
own on configuration values: transformers' ``@capture_outputs`` wrapper computes
``selected = selected_hidden_states(recordable_keys.get("output_hidden_states"))`` on a flag,
then decides with ``if selected is not None``. Left dynamic, the helper is an unknown callee
and the container the wrapper builds next cannot be proved static.

Such a call is evaluated where all of these hold: the function is a plain Python function
(not a method, not a class) from an installed package's file that dycl may follow
(``rewriter.user_code.followable``: not torch, not the standard library, not dycl), every
argument is a literal (``values.is_literal``: no tensor, no module, no object that could be
changed), and the result is a literal too; a list, dict or set result is copied (the copy is
fresh: the library's own object is never changed by the rewritten code).

Why this is no less sound than what dycl did before: a library function not followed is
traced as one graph, and tracing runs its Python once, on these same literal arguments,
baking its Python result into the graph. Evaluating it here runs the same code on the same
values once, at compile time. Assumes, as for every global dycl reads, that the globals the
function reads are not changed after compiling. Guarantees: no other call is made; a call
that raises, or returns anything else, counts as dynamic.
"""

from __future__ import annotations

import copy
import types
from collections.abc import Callable
from typing import Any

from dycl.rewriter.user_code import followable
from dycl.rewriter.values import is_literal


def is_library_function(func: Any) -> bool:
    """Whether ``func`` is a plain function of a followable installed package (module note)."""
    if not isinstance(func, types.FunctionType):
        return False
    return followable(func.__code__.co_filename)


def call_on_literals(func: types.FunctionType, args: list[Any], kwargs: dict[str, Any],
                     fresh: Callable[[Any], None]) -> tuple[bool, Any]:
    """``(True, result)`` where ``func(*args, **kwargs)`` may be folded (module note), else
    ``(False, None)``; ``fresh`` records a container result's copy as fresh."""
    if not all(is_literal(v) for v in [*args, *kwargs.values()]):
        return False, None
    try:
        result = func(*copy.deepcopy(args), **copy.deepcopy(kwargs))
    except Exception:  # noqa: BLE001 - whatever it raises, the call stays in the program, as written
        return False, None
    if isinstance(result, (set, frozenset)) and all(is_literal(v) for v in result):
        result = set(result) if isinstance(result, set) else result
    elif not is_literal(result):
        return False, None
    if isinstance(result, (list, dict, set)):
        result = copy.deepcopy(result)
        fresh(result)
    return True, result


__all__ = ["call_on_literals", "is_library_function"]
