"""The debug switch: whether dycl checks its own invariants after each pass.

Checking is on when the environment variable ``DYCL_CHECK`` is set to anything
but ``""`` or ``"0"`` (the test suite sets it in ``tests/conftest.py``), or
inside ``with checking(True):``. It is read at every check, never cached, and
``checking`` changes only the current context (a ``ContextVar``), so turning
it on in one thread or test does not turn it on elsewhere. The rewriter checks
that its output prints as the tree it built (``rewriter.verify.verify_printed``);
the HCFG passes check the graph they return (``hcfg.passes``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextvars import ContextVar

_FORCED: ContextVar[bool | None] = ContextVar("dycl_check", default=None)


def checks_enabled() -> bool:
    """Whether dycl checks its invariants (see the module docstring)."""
    forced = _FORCED.get()
    if forced is not None:
        return forced
    return os.environ.get("DYCL_CHECK", "") not in ("", "0")


@contextlib.contextmanager
def checking(enabled: bool = True) -> Iterator[None]:
    """Turn the checks on (or off) inside the ``with`` block."""
    token = _FORCED.set(enabled)
    try:
        yield
    finally:
        _FORCED.reset(token)
