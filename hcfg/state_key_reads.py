"""Why a branch fails on the example when it reads a module dict by a key it does not hold.

A module dict that ``forward`` fills (``self._cache[n] = torch.arange(n)`` under
``if n not in self._cache:``) is threaded through the function as state
(``rewriter.state_threading``); exploration runs every branch on the example, where the dict
is as the model holds it now, so the branch that reads a key the other branch would have
written fails with a ``KeyError``. That is not a problem of the example: it is a cache keyed
by a value of the call, which dycl does not compile as state. ``missing_key`` names it.

Assumes: ``threaded`` is the rewritten function's threaded state. Guarantees: an error only
for a ``KeyError`` raised by a statement that subscripts a threaded dict; None otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst
from dycl.rewriter.errors import SourceLocation, UnsupportedError
from dycl.rewriter.state_threading import ThreadedState
from dycl.rewriter.walk import descendants

_HINT = ("dycl compiles a module dict of bools, ints and floats keyed by strings as state, and runs every "
         "path on the example; compute the value in forward() on every call (what depends only on sizes, "
         "such as torch.arange(n), is folded into the graph), or fill the dict in __init__ for every key "
         "forward() reads")


def missing_key(stmt: cst.CSTNode, exc: Exception, threaded: Iterable[ThreadedState],
                location: SourceLocation | None) -> UnsupportedError | None:
    """The refusal of a cache on the module read by a key the example's dict lacks (module note)."""
    if not isinstance(exc, KeyError):
        return None
    dicts = {state.parameter: state.path for state in threaded if state.kind == "dict"}
    read = next((node.value.value for node in descendants(stmt) if isinstance(node, cst.Subscript)
                 and isinstance(node.value, cst.Name) and node.value.value in dicts), None)
    if read is None:
        return None
    return UnsupportedError(
        f"a read of the module dict `self.{dicts[read]}` by a key it does not hold on the example (KeyError: {exc}): "
        "forward() fills it on one path and reads it on another, a cache keyed by a value of the call",
        location, _HINT)


__all__ = ["missing_key"]
