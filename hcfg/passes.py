"""Graph passes, and the debug switch that checks the graph after each one.

A *graph pass* is a function that takes an HCFG (first argument) and returns a
new one (or a tuple whose first item is the new one: ``hoist_constants`` also
returns the constants it hoisted). Declaring it with ``@graph_pass`` is all a
pass needs: with checking on, the graph it returns goes through
``HCFG.check()`` (``hcfg.verify``) and a broken invariant raises
``HCFGInvariantError`` naming the pass, the node and the invariant.

The switch (``DYCL_CHECK``, ``with checking(True):``) is the rewriter's
(``rewriter.checking``): one switch for every check dycl makes of itself.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

from dycl.hcfg.graph import HCFG
from dycl.rewriter.checking import checking, checks_enabled

Pass = TypeVar("Pass", bound=Callable)


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
