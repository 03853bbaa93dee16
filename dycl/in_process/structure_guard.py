"""Detect the model's modules rearranged or reconfigured after compiling.

The compiled model holds what each submodule computed when ``dycl.compile`` ran: which
module fills each child slot, the forward hooks and pre-hooks registered on it (and the
global ones), an instance ``forward`` put on it, and the plain settings each module's code
reads (``LayerNorm.eps``, ``LeakyReLU.negative_slope``, a user's ``self.scale``, a shared
``self.config.scale``) where the exporter, not dycl's evaluator, read them (a submodule
exported whole). None of these is a weight, a global or an attribute dycl's evaluator read,
so the other guards miss ``model.fc = nn.Linear(4, 4)``, ``model.act = nn.GELU()``,
``model.norm.eps = 1e-3``, ``model.child.scale = 5.0``, ``model.fc.register_forward_hook(f)``
and ``model.act.forward = f``: each made the compiled model silently disagree with eager.
``StructureGuard`` records them; ``check`` raises ``StaleStructureError`` naming the module once any changed.

Assumes: modules are rearranged by attribute writes (``nn.Module.__setattr__`` puts a child
in its parent's ``_modules``, a setting in the module's ``__dict__``) and hooks are
registered through ``RemovableHandle`` (whose global ``next_id`` grows with every hook
registered anywhere); a module's code is its class's ``forward``, the methods it calls and the
non-torch functions they call (``_names_read``): only settings named there are watched, so a
user's bookkeeping attribute (``model.step = i``) is not refused. Slots in ``state`` (module state
the compiled model threads, ``dycl.in_process.state_sync``) are not watched.

Guarantees: ``check`` raises once a child slot holds another object (or none), an instance
``forward`` appeared, vanished or was rebound, a hook was registered on or removed from a
watched module or globally, or a watched setting was rebound to an unequal value
(``eps = 1e-5`` again is no change). ``dicts``/``keys``/``values`` are the identity slots,
``forward_absent`` the module dicts that must not hold ``forward``, and ``hook_stamp()`` the hook
state in two numbers, for ``dycl.in_process.call_guard`` to check in one pass (a hook put in a table
by hand, not through ``RemovableHandle``, into a table that held none is seen only once something
else sends the call to the full check, which compares every table).
"""

from __future__ import annotations

import functools
import inspect
import operator
import types
from collections.abc import Iterator

import torch
from torch.nn.modules import module as module_globals
from torch.utils.hooks import RemovableHandle

from dycl.in_process.globals_guard import _same
from dycl.rewriter.code_names import DYNAMIC_ACCESS, code_names, names_reached
from dycl.rewriter.config_reads import holds_config

_MISSING = object()
_SETTING_TYPES = (int, float, bool, str, tuple, type(None), torch.dtype)


class StaleStructureError(RuntimeError):
    """A submodule, hook, instance ``forward`` or module setting was changed after ``dycl.compile``."""


@functools.cache
def _names_read(layer: type) -> frozenset[str] | None:
    """The names ``layer.forward``, the methods of ``layer`` it calls and the (non-torch) functions they
    call load, transitively; ``None`` where that code may read attributes by a computed name (then any
    setting may be read)."""
    functions = []
    names: set[str] = set()
    pending = ["forward"]
    while pending:
        method = inspect.getattr_static(layer, pending.pop(), None)
        method = getattr(method, "__func__", method)  # a staticmethod or classmethod
        if not isinstance(method, types.FunctionType):
            continue
        functions.append(method)
        loaded = code_names(method.__code__)
        pending += [name for name in loaded - names if callable(inspect.getattr_static(layer, name, None))]
        names |= loaded
    names |= names_reached(functions)
    return None if names & DYNAMIC_ACCESS else frozenset(names)


def _settings(module: torch.nn.Module) -> Iterator[tuple[dict, str, str]]:
    """The plain settings ``module``'s own code reads (``eps``, ``stride``, a user's ``self.scale``), not its
    mode flag, and those of a config object it holds (``self.config.scale``), as ``(dict, key, where)``."""
    # an instance forward (self.forward = self.early_exit) is not the class's: any setting may be read
    read = None if "forward" in module.__dict__ else _names_read(type(module))
    for name, value in module.__dict__.items():
        if name == "training" or (read is not None and name not in read):
            continue
        if isinstance(value, _SETTING_TYPES):
            yield module.__dict__, name, name
        elif not isinstance(value, torch.nn.Module) and holds_config(value):
            yield from ((value.__dict__, key, f"{name}.{key}") for key, setting in vars(value).items()
                        if isinstance(setting, _SETTING_TYPES) and (read is None or key in read))


def _hook_tables(modules: list[torch.nn.Module]) -> tuple[dict, ...]:
    return (module_globals._global_forward_hooks, module_globals._global_forward_pre_hooks,
            *(table for module in modules for table in (module._forward_hooks, module._forward_pre_hooks)))


class StructureGuard:
    """Raises on ``check()`` once a child, hook, instance ``forward`` or setting of ``model`` changed."""

    def __init__(self, model: torch.nn.Module, state: frozenset[tuple[int, str]] = frozenset()) -> None:
        dicts: list[dict] = []
        keys: list[str] = []
        self._where: list[str] = []
        unique: dict[int, tuple[str, torch.nn.Module]] = {}
        seen: set[tuple[int, str]] = set()  # a config object shared by several modules: watched once
        for prefix, module in model.named_modules(remove_duplicate=False):
            if id(module) in unique:  # a shared module: watched where it is first reached
                continue
            unique[id(module)] = (prefix, module)
            dot = f"{prefix}." if prefix else ""
            slots = [(module._modules, name) for name in module._modules]
            if "forward" in module.__dict__:
                slots.append((module.__dict__, "forward"))
            slots = [(table, name, name) for table, name in slots]
            slots += [(table, name, where) for table, name, where in _settings(module)
                      if (id(module), name) not in state and (id(table), name) not in seen]
            for table, name, where in slots:
                seen.add((id(table), name))
                dicts.append(table)
                keys.append(name)
                self._where.append(f"model.{dot}{where}")
        self.dicts, self.keys = tuple(dicts), tuple(keys)
        self.values = tuple(map(dict.get, self.dicts, self.keys))
        bare = [(prefix, module) for prefix, module in unique.values() if "forward" not in module.__dict__]
        self.forward_absent = tuple(module.__dict__ for _, module in bare)
        self._absent_where = tuple(f"model.{prefix}" if prefix else "model" for prefix, _ in bare)
        modules = [module for _, module in unique.values()]
        self.hook_tables = _hook_tables(modules)
        self._hooks = tuple(tuple(table) for table in self.hook_tables)
        self._held_hooks = tuple(table for table in self.hook_tables if table)

    def hook_stamp(self) -> tuple[int, int]:
        """The hook state in two numbers: hooks registered anywhere so far, and hooks held by the tables
        that held any at compile time (an empty table gains one only by a registration, which moves the first)."""
        return RemovableHandle.next_id, sum(map(len, self._held_hooks))

    def unchanged(self) -> bool:
        """Whether nothing watched changed (the hooks compared exactly, not by ``hook_stamp``)."""
        return (all(map(_same, map(dict.get, self.dicts, self.keys, (_MISSING,) * len(self.keys)), self.values))
                and not any(map(operator.contains, self.forward_absent, ("forward",) * len(self.forward_absent)))
                and tuple(map(tuple, self.hook_tables)) == self._hooks)

    def check(self) -> None:
        """Raise ``StaleStructureError`` if anything watched changed since compiling."""
        if self.unchanged():
            return
        changed = [where for table, key, value, where in zip(self.dicts, self.keys, self.values, self._where)
                   if not _same(table.get(key, _MISSING), value)]
        changed += [f"{where}.forward" for table, where in zip(self.forward_absent, self._absent_where)
                    if "forward" in table]
        if tuple(map(tuple, self.hook_tables)) != self._hooks:
            changed.append("the forward hooks")
        shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
        raise StaleStructureError(f"the model's modules changed after dycl.compile ({shown}); the compiled model "
                                  "still computes what they did then: call dycl.compile again")


__all__ = ["StaleStructureError", "StructureGuard"]
