"""The names a function's code may load: what the state and globals checks read code by.

``code_names`` lists the names a code object loads (``co_names``: globals, attributes, methods), with
those of the code nested in it (lambdas, nested functions, comprehensions). ``names_reached`` follows
the functions outside torch that such code names as globals (a helper given ``self``), transitively.

Assumes: code reaches what it reads by name (``DYNAMIC_ACCESS`` lists the names through which it may
read by a computed name instead: a caller that finds one must assume any name is read).
Guarantees: a name the code loads directly or through a reached helper is in the result; torch's own
functions are not followed.
"""

from __future__ import annotations

import types
from collections.abc import Iterable

#: names through which code reads attributes by a computed name
DYNAMIC_ACCESS = frozenset({"getattr", "__dict__", "vars", "__getattribute__", "__getattr__"})


def code_names(code: types.CodeType) -> set[str]:
    """The names ``code`` and the code objects nested in it load."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= code_names(const)
    return names


def names_reached(functions: Iterable[types.FunctionType]) -> set[str]:
    """The names loaded by ``functions`` and by the non-torch global functions they name, transitively."""
    names: set[str] = set()
    pending, seen = list(functions), set()
    while pending:
        function = pending.pop()
        if id(function) in seen:
            continue
        seen.add(id(function))
        loaded = code_names(function.__code__)
        names |= loaded
        pending += [helper for helper in (function.__globals__.get(name) for name in loaded)
                    if isinstance(helper, types.FunctionType) and not (helper.__module__ or "").startswith("torch")]
    return names


__all__ = ["DYNAMIC_ACCESS", "code_names", "names_reached"]
