"""The generated host program as a module object, without a file or ``sys.modules``.

Assumes ``source`` is a host program dycl generated (``hostgen``); guarantees that
tracebacks and the host's own error messages show its lines (``linecache``) and that
nothing process-wide changes besides that cache entry, keyed by the source's hash."""

from __future__ import annotations

import hashlib
import linecache
import types


def load_host_module(source: str, name: str = "dycl_host") -> types.ModuleType:
    """The module that running ``source`` defines, named ``name``."""
    module = types.ModuleType(name)
    module.__file__ = f"<{name}-{hashlib.sha256(source.encode()).hexdigest()[:12]}>"
    linecache.cache[module.__file__] = (len(source), None, source.splitlines(keepends=True), module.__file__)
    # dont_inherit: compiled as host.py is, without this module's __future__ flags (string annotations
    # would send dataclasses looking for the module in sys.modules, where it is deliberately absent)
    exec(compile(source, module.__file__, "exec", dont_inherit=True), module.__dict__)  # noqa: S102 - our host
    return module


__all__ = ["load_host_module"]
