"""Silence the model's own ``print`` while dycl runs it to compile it.

Compiling runs ``forward`` (and the sub-DNNs cut from it) several times: on the
example, on fake tensors with symbolic sizes, through the generated host. A
``print`` in ``forward`` would print each time, once with a symbolic shape. The
compiled model prints where eager prints (a ``print`` is a host operation); compiling
prints nothing.

Note: why a per-thread filter on ``sys.stdout``. dycl must not touch the user's module
globals (where ``print`` is looked up), and ``contextlib.redirect_stdout`` swaps the
stream for every thread of the process. ``muted()`` instead puts a thin proxy in front
of the current ``sys.stdout`` that drops writes from the muting thread only and passes
every other thread's writes through unchanged; on leaving the outermost ``muted()`` the
original stream is put back, unless someone else replaced ``sys.stdout`` meanwhile (then
their stream is left in place). Assumes the model prints to ``sys.stdout`` (``print``'s
default); ``print(..., file=f)`` to another stream is not filtered.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_LOCK = threading.Lock()


class _ThreadFilter:
    """``stream`` for every thread except those in ``muted``, whose writes are dropped."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.muted: dict[int, int] = {}  # thread ident -> nesting depth

    def write(self, text: str) -> int:
        if threading.get_ident() in self.muted:
            return len(text)
        return self.stream.write(text)

    def flush(self) -> None:
        if threading.get_ident() not in self.muted:
            self.stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


@contextmanager
def muted() -> Iterator[None]:
    """Drop what this thread writes to ``sys.stdout`` for the duration of the block."""
    ident = threading.get_ident()
    with _LOCK:
        proxy = sys.stdout if isinstance(sys.stdout, _ThreadFilter) else _ThreadFilter(sys.stdout)
        sys.stdout = proxy
        proxy.muted[ident] = proxy.muted.get(ident, 0) + 1
    try:
        yield
    finally:
        with _LOCK:
            proxy.muted[ident] -= 1
            if not proxy.muted[ident]:
                del proxy.muted[ident]
            if not proxy.muted and sys.stdout is proxy:
                sys.stdout = proxy.stream


__all__ = ["muted"]
