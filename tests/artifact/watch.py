"""Which files a piece of code opens (an audit hook, installed once per test process)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

_opened: list[str] | None = None
_installed = False


def _hook(event: str, args: tuple) -> None:
    if _opened is not None and event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        _opened.append(os.path.abspath(os.fsdecode(args[0])))


@contextlib.contextmanager
def files_opened() -> Iterator[list[str]]:
    """Collect the absolute paths opened inside the ``with`` block."""
    global _opened, _installed
    if not _installed:
        sys.addaudithook(_hook)
        _installed = True
    _opened = []
    try:
        yield _opened
    finally:
        _opened = None
