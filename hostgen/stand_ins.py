"""Stand-ins in the host for the user's record classes that host operations construct.

A host operation such as ``state = State(t, 0)`` (a dataclass holding a sub-DNN
output and a counter) needs ``State`` in ``host.py``, which cannot import the
user's module. For a *plain record* — a dataclass with ``object`` as its only
base, no ``__post_init__``, no methods, properties or class attributes of its
own, and literal defaults — the host gets a small class of the same name whose
``__init__`` takes the same parameters and sets the same attributes, so
construction and field reads and writes behave as on the original. It compares
by identity (the original's generated ``__eq__`` compares fields) and has no
``repr`` of its fields: host operations that need those are not plain
bookkeeping. Anything else returns None (the caller refuses it).

A record that crosses into a compiled part is rebuilt there as the original
class (``hcfg.pytree_ports``); one that a compiled part returns to the host is
a ``types.SimpleNamespace`` with the same fields (``hostgen.port_trees``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from dycl.rewriter.values import is_literal

# what the dataclass decorator and the class statement put into a class's namespace
_GENERATED = frozenset({
    "__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__", "__lt__", "__le__", "__gt__",
    "__ge__", "__match_args__", "__dataclass_fields__", "__dataclass_params__", "__getstate__", "__setstate__",
    "__slots__", "__weakref__", "__dict__", "__doc__", "__module__", "__qualname__", "__annotations__",
    "__replace__", "__firstlineno__", "__static_attributes__", "__annotate__", "__annotate_func__",
    "__annotations_cache__", "__orig_bases__", "__parameters__", "__slotnames__",  # copyreg caches the last
})


def record_stand_in(name: str, cls: Any) -> str | None:
    """Source of the host's stand-in class for ``cls`` (bound to ``name``), or None
    when ``cls`` is not a plain record (see the module note)."""
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)) or cls.__bases__ != (object,):
        return None
    fields = dataclasses.fields(cls)
    own = set(vars(cls)) - _GENERATED - {f.name for f in fields}
    if own or not name.isidentifier():
        return None
    parameters, body = [], []
    for field in fields:
        if field.kw_only is True or field.default_factory is not dataclasses.MISSING or (
                field.default is not dataclasses.MISSING and not is_literal(field.default)):
            return None
        if field.init:
            default = "" if field.default is dataclasses.MISSING else f"={field.default!r}"
            parameters.append(f"{field.name}{default}")
            body.append(f"        self.{field.name} = {field.name}")
        elif field.default is not dataclasses.MISSING:
            body.append(f"        self.{field.name} = {field.default!r}")
        else:
            return None
    signature = ", ".join(["self", *parameters])
    lines = [f"class {name}:",
             f'    """Stand-in for {cls.__module__}.{cls.__qualname__} (a dataclass): its fields, no methods."""',
             "",
             f"    def __init__({signature}):",
             *(body or ["        pass"])]
    return "\n".join(lines)


__all__ = ["record_stand_in"]
