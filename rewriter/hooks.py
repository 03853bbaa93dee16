"""Module forward hooks: which ones ``module(x)`` runs, and which dycl can keep.

``nn.Module.__call__`` runs the global forward pre-hooks and the module's own
(``register_forward_pre_hook``; a non-None result replaces the arguments), then
``forward``, then the global and the module's forward hooks
(``register_forward_hook``, also ``with_kwargs`` and ``always_call``; a non-None
result replaces the output). Where dycl keeps a submodule call opaque, the
exporter traces ``__call__`` itself, so the hooks' computation is compiled into
the sub-DNN like any other code; where dycl inlines a ``forward`` (the model's
own, and every submodule that branches on data), ``rewriter.hooked_calls`` and
``rewriter.root_hooks`` write the hook calls out around it.

Guarantees: ``forward_hooks`` lists the hooks in the order ``__call__`` runs
them; ``refuse_impure_hooks`` finds every hook anywhere in the model that writes
Python state (an item or attribute store, a mutating method such as
``append``/``update``/``__setitem__``, an in-place tensor method,
``global``/``nonlocal`` stores, ``setattr``), or whose code dycl cannot read: a
traced hook runs only while compiling, so such a write would not happen per
call. The hooks of a module with such a hook are written out as code
(``rewriter.written_hooks``) where ``rewriter.hook_effects`` admits each of them;
otherwise it raises ``UnsupportedError`` naming the hook. User functions a hook
reaches through its globals or closure are read too.
``refuse_dropped_hooks`` names the first hook of a module whose hooks cannot be
written out.

Assumes: a hook that passes this check is a function of its arguments (and of
constants it reads), so tracing it once is its meaning; a hook that calls an
object dycl cannot read (a callable instance) is refused.
"""

from __future__ import annotations

import dis
import functools
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from dycl.rewriter.errors import SourceLocation, UnsupportedError
from dycl.rewriter.legacy_weight_norm import is_legacy_weight_norm, legacy_weight_norm_error
from dycl.rewriter.vocabulary import MUTATING_METHODS
from torch.nn.modules import module as _module

_STORES = frozenset({"STORE_ATTR", "STORE_SUBSCR", "DELETE_ATTR", "DELETE_SUBSCR", "STORE_GLOBAL",
                     "DELETE_GLOBAL", "STORE_SLICE", "DELETE_SLICE"})
_WRITING_CALLS = frozenset({"setattr", "delattr", "register_buffer", "register_parameter", "add_module", "apply"})
_HINT_PURE = ("dycl compiles a hook that writes the state of the module it is registered on (through its first "
              "parameter, or self for a method of a module of the model): counters, buffers updated in place, "
              "lists of tensors appended to; otherwise return a value instead of storing it, or remove the hook "
              "(handle.remove()) before dycl.compile and read activations from the model's outputs")


@dataclass(frozen=True)
class Hook:
    """One hook ``__call__`` runs: ``kind`` says which ("forward hook", "global forward pre-hook"...)."""

    kind: str
    function: object

    @property
    def target(self) -> object:
        """The Python function that runs (partials and bound methods unwrapped)."""
        function = self.function
        while isinstance(function, functools.partial):
            function = function.func
        return function.__func__ if isinstance(function, types.MethodType) else function

    @property
    def name(self) -> str:
        return getattr(self.target, "__qualname__", None) or repr(self.function)[:60]

    @property
    def location(self) -> SourceLocation | None:
        code = getattr(self.target, "__code__", None)
        return SourceLocation(code.co_filename, code.co_firstlineno) if code is not None else None


def forward_hooks(module: torch.nn.Module) -> list[Hook]:
    """Every forward (pre-)hook ``module(...)`` runs, global ones first, as ``__call__`` orders them."""
    tables = [("global forward pre-hook", _module._global_forward_pre_hooks),
              ("forward pre-hook", module._forward_pre_hooks),
              ("global forward hook", _module._global_forward_hooks),
              ("forward hook", module._forward_hooks)]
    return [Hook(kind, function) for kind, table in tables for function in table.values()]


def hook_functions(model: torch.nn.Module) -> list[types.FunctionType]:
    """The Python functions of every forward hook in ``model`` (what they read is compiled in)."""
    hooks = (hook for module in model.modules() for hook in forward_hooks(module))
    return [hook.target for hook in hooks if isinstance(hook.target, types.FunctionType)]


def refuse_dropped_hooks(module: torch.nn.Module, what: str, location: SourceLocation | None) -> None:
    """Raise for hooks of ``module``, which dycl cannot write out (``what`` names the module and why)."""
    hooks = forward_hooks(module)
    if not hooks:
        return
    hook = hooks[0]
    defined = f", defined at {hook.location}" if hook.location else ""
    raise UnsupportedError(
        f"the {hook.kind} {hook.name}{defined} on {what} ({len(hooks)} hook(s) in all)", location,
        "call the model as dycl.compile(model, example) does, with forward's arguments written out; or move the "
        "hook's computation into forward, or remove the hook (handle.remove()) before dycl.compile")


def refuse_impure_hooks(model: torch.nn.Module, is_user_code: Callable[[object], bool],
                        admit: Callable[..., str | None] | None = None) -> frozenset[int]:
    """Raise for the first hook in ``model`` that writes Python state or cannot be read; the
    user functions it reaches (``is_user_code``: ``rewriter.inline.is_user_code``) are read too.
    ``admit(hook, module, model, reaches_writes)`` (``rewriter.hook_effects.hook_refusal``) says why
    a state-writing hook cannot be written out as code instead (None: it can); the ids of the
    modules whose hooks are then all written out are returned."""
    written: set[int] = set()
    for prefix, module in model.named_modules(remove_duplicate=False):
        hooks = forward_hooks(module)
        if any(is_legacy_weight_norm(hook.function) for hook in hooks):
            raise legacy_weight_norm_error(model, prefix)
        impure = [(hook, _state_write(hook.target, set(), is_user_code)) for hook in hooks]
        if all(problem is None for _, problem in impure):
            continue
        for hook, problem in impure:
            refusal = "is not compiled" if admit is None else admit(
                hook, module, model, lambda function: reached_writes(function, is_user_code))
            if refusal is not None:
                owner = f"submodule {prefix!r}" if prefix else "the model"
                which = f"which {problem}; it " if problem is not None else "written out with a hook that writes " \
                    "state; it "
                raise UnsupportedError(f"the {hook.kind} {hook.name} on {owner} ({type(module).__qualname__}), "
                                       f"{which}{refusal}", hook.location, _HINT_PURE)
        written.add(id(module))
    return frozenset(written)


def reached_writes(function: types.FunctionType, is_user_code: Callable[[object], bool]) -> str | None:
    """What a user function ``function`` calls (not ``function`` itself) writes; None if nothing."""
    for reached in _reached(function, is_user_code):
        problem = _state_write(reached, {id(function)}, is_user_code)
        if problem is not None:
            return f"calls {getattr(reached, '__qualname__', reached)!s:.60}, which {problem}"
    return None


def _instructions(code: types.CodeType) -> Iterator[tuple[types.CodeType, dis.Instruction]]:
    for instruction in dis.get_instructions(code):
        yield code, instruction
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _instructions(const)


def _state_write(function: object, seen: set[int], is_user_code: Callable[[object], bool]) -> str | None:
    """What in ``function`` (or a user function it reaches) writes Python state; None if nothing."""
    if id(function) in seen:
        return None
    seen.add(id(function))
    code = getattr(function, "__code__", None)
    if not isinstance(function, types.FunctionType) or code is None:
        return f"is {function!r:.60}, whose code dycl cannot read"
    for owner, instruction in _instructions(code):
        name = instruction.argval if isinstance(instruction.argval, str) else ""
        if instruction.opname in _STORES:
            what = "an item" if "SUBSCR" in instruction.opname or "SLICE" in instruction.opname else repr(name)
            return f"stores into {what} (line {_line(instruction)})"
        if instruction.opname == "STORE_DEREF" and name in owner.co_freevars:
            return f"assigns the enclosing function's variable {name!r} (line {_line(instruction)})"
        if instruction.opname in ("LOAD_ATTR", "LOAD_METHOD") and _mutates(name):
            return f"calls the mutating method {name}() (line {_line(instruction)})"
        if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME") and name in _WRITING_CALLS:
            return f"calls {name}() (line {_line(instruction)})"
    for reached in _reached(function, is_user_code):
        problem = _state_write(reached, seen, is_user_code)
        if problem is not None:
            return f"calls {getattr(reached, '__qualname__', reached)!s:.60}, which {problem}"
    return None


def _mutates(method: str) -> bool:
    in_place_tensor = method.endswith("_") and not method.startswith("_")
    return method in MUTATING_METHODS or in_place_tensor or method in _WRITING_CALLS


def _line(instruction: dis.Instruction) -> int | None:
    positions = getattr(instruction, "positions", None)
    return positions.lineno if positions is not None else None


def _reached(function: types.FunctionType, is_user_code: Callable[[object], bool]) -> Iterator[object]:
    """User objects ``function`` may call: functions and callable instances among its globals and cells."""
    names = set()
    for _, instruction in _instructions(function.__code__):
        if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            names.add(instruction.argval)
    values = [function.__globals__[name] for name in sorted(names) if name in function.__globals__]
    for cell in function.__closure__ or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:
            continue
    for value in values:
        if (isinstance(value, types.FunctionType) and is_user_code(value)) or _callable_instance(value):
            yield value


def _callable_instance(value: object) -> bool:
    kinds = (type, types.ModuleType, types.BuiltinFunctionType, torch.nn.Module, functools.partial)
    return callable(value) and not isinstance(value, kinds) and type(value).__module__.split(".")[0] not in (
        "torch", "builtins", "numpy", "math", "functools")


__all__ = ["Hook", "forward_hooks", "hook_functions", "reached_writes", "refuse_dropped_hooks", "refuse_impure_hooks"]
