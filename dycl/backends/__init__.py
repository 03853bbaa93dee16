"""Backends compile a sub-DNN variant to bytes and run it on numpy arrays.

Each backend provides: ``compile(module, variant) -> bytes``, the host runtime
snippet that defines ``load_executable(data, entry, options)`` in the generated
host (``entry``: the manifest's ``SubDNNEntry``), and ``executable(data, entry,
module)`` for running in-process.
"""

from __future__ import annotations

from dycl.backends.base import Backend
from dycl.backends.registry import get_backend

__all__ = ["Backend", "get_backend"]
