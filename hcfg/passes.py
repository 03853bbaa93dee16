"""Graph passes, and the debug switch that checks the graph after each one.

A *graph pass* is a function that takes an HCFG (first argument) and returns a
new one (or a tuple whose first item is the new one: ``hoist_constants`` also
returns the constants it hoisted). Declaring it with ``@graph_pass`` is all a
pass needs: with checking on, the graph it returns goes through
``HCFG.check()`` (``hcfg.verify``) and a broken invariant raises
``HCFGInvariantError`` naming the pass, the node and the invariant.

Checking is on when the environment variable ``DYCL_CHECK`` is set to anything
but ``""`` or ``"0"`` (the test suite sets it in ``tests/conftest.py``), or
inside ``with checking(True):``. It is read on every pass, never cached, and
``checking`` changes only the current context (a ``ContextVar``), so turning
it on in one thread or test does not turn it on elsewhere.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import TypeVar

from dycl.hcfg.graph import HCFG

_FORCED: ContextVar[bool | None] = ContextVar("dycl_check", default=None)

Pass = TypeVar("Pass", bound=Callable)


def checks_enabled() -> bool:
    """Whether graph passes check their result (see the module docstring)."""
    forced = _FORCED.get()
    if forced is not None:
        return forced
    return os.environ.get("DYCL_CHECK", "") not in ("", "0")


@contextlib.contextmanager
def checking(enabled: bool = True) -> Iterator[None]:
    """Turn checking after every graph pass on (or off) inside the ``with`` block."""
    token = _FORCED.set(enabled)
    try:
        yield
    finally:
        _FORCED.reset(token)


def graph_pass(function: Pass) -> Pass:
    """Declare ``function`` a graph pass: with checking on, its result is checked."""

    @functools.wraps(function)
    def run(*args, **kwargs):
        result = function(*args, **kwargs)
        if checks_enabled():
            graph = result[0] if isinstance(result, tuple) else result
            if not isinstance(graph, HCFG):
                raise TypeError(f"graph pass {function.__name__} returned {type(graph).__name__}, not an HCFG")
            graph.check(after=function.__name__)
        return result

    return run  # type: ignore[return-value]


__all__ = ["checking", "checks_enabled", "graph_pass"]
