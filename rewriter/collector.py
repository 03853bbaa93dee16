"""Pausing Python's cyclic garbage collector while the compiler's front end runs.

Note: why. The rewriter and the HCFG walks allocate many short-lived objects (libcst
nodes, states, fake tensors) and keep few cycles. Left on, the collector runs its full
collections over the whole process in the middle of them, and a process that holds much
else (a notebook, ``benchmarks/bench.py`` after torch.compile) pays for all of it: with 3
million other objects alive, one full collection made blockdrop's HCFG stages take 1.05 s
instead of 0.18 s, and in bench.py skipnet_rnn's 0.44 s instead of 0.09 s. Paused, the
cycles are collected when the collector resumes, right after.

Guarantees: the collector's state is what it was before, also when the body raises; a
pause inside a pause does not resume it early.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused_collector() -> Iterator[None]:
    """Run the body with the cyclic garbage collector off (see the module docstring)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
