"""The user's model around ``dycl.compile``: saved before, compared and restored after.

Compiling runs the model's statements (tracing every branch, exporting every
sub-DNN), so whatever ``forward`` does to module state would happen to the
user's model. ``ModelSnapshot`` records everything such code can change:

- every parameter and buffer (a copy of its value, its ``_version`` and which
  tensor object the module holds under that name; a value changed without its
  ``_version``, through ``.data``, counts as a write too),
- the ``training`` flag of every submodule,
- plain Python attributes (numbers, strings, and lists/dicts/sets/tuples of
  them are copied; any other object is recorded by identity).

Guarantees: after ``restore`` every item above equals its recorded value, and a
tensor that was not written keeps its ``_version`` (it is not copied back).
``changes`` names what differs, so a compile whose tracing wrote module state is
refused instead of compiling a frozen copy of that state (``preserved``).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from dycl.rewriter.errors import SourceLocation, UnsupportedError

_PLAIN = (bool, int, float, complex, str, bytes, type(None))
# what nn.Module keeps in its __dict__ for itself; tensors and submodules are compared separately
_INTERNALS = frozenset(vars(torch.nn.Module())) - {"training"}


def _copyable(value: Any) -> bool:
    if isinstance(value, _PLAIN):
        return True
    if isinstance(value, (list, tuple, set, frozenset)):
        return all(_copyable(v) for v in value)
    if isinstance(value, dict):
        return all(_copyable(k) and _copyable(v) for k, v in value.items())
    return False


def _tensor_slots(model: torch.nn.Module) -> Iterator[tuple[str, torch.nn.Module, str, str, torch.Tensor | None]]:
    """(qualified name, owner, kind, name, tensor) for every parameter and buffer slot."""
    for prefix, module in model.named_modules(remove_duplicate=False):
        dot = f"{prefix}." if prefix else ""
        for name, tensor in module._parameters.items():
            yield f"{dot}{name}", module, "_parameters", name, tensor
        for name, tensor in module._buffers.items():
            yield f"{dot}{name}", module, "_buffers", name, tensor


@dataclass
class _TensorRecord:
    tensor: torch.Tensor | None
    version: int
    value: torch.Tensor | None


@dataclass
class ModelSnapshot:
    """What ``model`` looked like when ``take`` was called."""

    model: torch.nn.Module
    tensors: dict[tuple[int, str, str], tuple[str, torch.nn.Module, _TensorRecord]] = field(default_factory=dict)
    training: list[tuple[torch.nn.Module, bool]] = field(default_factory=list)
    attributes: list[tuple[str, torch.nn.Module, dict[str, tuple[bool | str, Any]]]] = field(default_factory=list)

    @classmethod
    def take(cls, model: torch.nn.Module) -> ModelSnapshot:
        snapshot = cls(model)
        with torch.no_grad():
            for qualified, module, kind, name, tensor in _tensor_slots(model):
                value = None if tensor is None else tensor.detach().clone()
                version = -1 if tensor is None else tensor._version
                snapshot.tensors[(id(module), kind, name)] = (qualified, module, _TensorRecord(tensor, version, value))
        for prefix, module in model.named_modules(remove_duplicate=False):
            snapshot.training.append((module, module.training))
            plain = {}
            for key, value in vars(module).items():
                if key not in _INTERNALS and key != "training":
                    plain[key] = _recorded(value)
            snapshot.attributes.append((prefix or type(model).__name__, module, plain))
        return snapshot

    def changes(self) -> list[str]:
        """What differs from the snapshot: "buffer running (written in place)", ..."""
        found: list[str] = []
        current = {(id(module), kind, name): tensor for _, module, kind, name, tensor in _tensor_slots(self.model)}
        for key, (qualified, _, record) in self.tensors.items():
            kind = "parameter" if key[1] == "_parameters" else "buffer"
            tensor = current.get(key, record.tensor)
            if tensor is not record.tensor:
                found.append(f"{kind} {qualified} (replaced)")
            elif tensor is not None and _written(tensor, record):
                # a write that happened to leave the example's value unchanged is still a write
                found.append(f"{kind} {qualified} (written in place)")
        for key in current.keys() - self.tensors.keys():
            found.append(f"tensor slot {key[2]} (added)")
        for module, training in self.training:
            if module.training != training:
                found.append(f"{type(module).__name__}.training (switched to {module.training})")
        for where, module, plain in self.attributes:
            now = vars(module)
            for key, (copied, value) in plain.items():
                if key not in now:
                    found.append(f"attribute {where}.{key} (deleted)")
                elif _changed(now[key], copied, value):
                    found.append(f"attribute {where}.{key} (changed)")
            for key in _added(now, plain):
                found.append(f"attribute {where}.{key} (added)")
        return found

    def restore(self) -> None:
        """Put every recorded item back; tensors that were not written are left alone."""
        with torch.no_grad():
            for (_, kind, name), (_, module, record) in self.tensors.items():
                getattr(module, kind)[name] = record.tensor
                tensor = record.tensor
                if tensor is not None and _written(tensor, record):
                    if tensor.shape != record.value.shape:  # resized by a write (``out=`` at another size)
                        tensor.data = record.value
                    else:
                        tensor.copy_(record.value)
        for module, training in self.training:
            module.training = training
        for _, module, plain in self.attributes:
            now = vars(module)
            for key in _added(now, plain):
                del now[key]
            for key, (copied, value) in plain.items():
                if copied == _ITEMS and type(now.get(key)) is list:
                    now[key][:] = value  # a list of tensors appended to in place keeps its identity
                elif copied == _ITEMS:
                    now[key] = list(value)
                elif copied:
                    _restore_in_place(now, key, value)
                else:
                    now[key] = value


def _written(tensor: torch.Tensor, record: _TensorRecord) -> bool:
    """Whether ``tensor`` was written since ``record``: its version moved, or its value did without it
    (a write through ``.data`` or ``.detach()`` bumps another version counter)."""
    if tensor._version != record.version:
        return True
    if tensor.shape != record.value.shape or tensor.dtype != record.value.dtype:
        return True
    if tensor.is_meta or tensor.layout != torch.strided or tensor.is_quantized:
        return False  # no values to compare: the version alone decides
    same = tensor == record.value
    if tensor.is_floating_point() or tensor.is_complex():
        same |= tensor.isnan() & record.value.isnan()
    return not bool(same.all())


#: how a list holding tensors is recorded: its items, by identity (``forward`` may append to it)
_ITEMS = "items"


def _recorded(value: Any) -> tuple[bool | str, Any]:
    """(how, what): a deep copy of a plain value, the items of a list of tensors, else the object."""
    if _copyable(value):
        return True, copy.deepcopy(value)
    if type(value) is list and all(isinstance(v, torch.Tensor) or _copyable(v) for v in value):
        return _ITEMS, list(value)
    return False, value


def _changed(now: Any, copied: bool | str, value: Any) -> bool:
    if copied == _ITEMS:
        return type(now) is not list or len(now) != len(value) or any(a is not b for a, b in zip(now, value))
    return not _same(now, value) if copied else now is not value


def _added(now: dict[str, Any], recorded: dict[str, Any]) -> list[str]:
    """Public attributes added since the snapshot; a new ``_name`` may be torch's own
    lazily created bookkeeping, and a forward cannot add one unnoticed (``self._x = ...``
    is refused by the rewriter)."""
    return [key for key in now.keys() - recorded.keys() - _INTERNALS - {"training"} if not key.startswith("_")]


def _same(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001 - an odd __eq__ means "changed"
        return False


def _restore_in_place(namespace: dict[str, Any], key: str, saved: Any) -> None:
    """Restore a copied attribute; a mutated list/dict/set keeps its identity (the user may hold it)."""
    current = namespace.get(key)
    if type(current) is type(saved) and isinstance(saved, list):
        current[:] = copy.deepcopy(saved)
    elif type(current) is type(saved) and isinstance(saved, (dict, set)):
        current.clear()
        current.update(copy.deepcopy(saved))
    else:
        namespace[key] = copy.deepcopy(saved)


def training_modules(model: torch.nn.Module) -> list[str]:
    """Names of the submodules (``""`` for the model itself) in training mode."""
    return [name for name, module in model.named_modules() if module.training]


@contextmanager
def eval_mode(model: torch.nn.Module) -> Iterator[None]:
    """Every submodule in eval mode inside the block, each one's own flag restored after."""
    flags = [(module, module.training) for module in model.modules()]
    try:
        for module, _ in flags:
            module.training = False
        yield
    finally:
        for module, training in flags:
            module.training = training


@contextmanager
def preserved(model: torch.nn.Module, refuse_writes: bool = True) -> Iterator[None]:
    """Run the block with ``model`` in eval mode; afterwards ``model`` is as it was
    before, and ``ModelStateError`` is raised if the block wrote its state (unless
    ``refuse_writes`` is False: a block that runs eager ``forward``, which may write state)."""
    snapshot = ModelSnapshot.take(model)
    try:
        with eval_mode(model):
            yield
    except BaseException:
        changed = snapshot.changes()
        snapshot.restore()
        if changed and refuse_writes:
            raise ModelStateError(model, changed)  # noqa: B904 - the cause; the original stays as context
        raise
    changed = snapshot.changes()
    snapshot.restore()
    if changed and refuse_writes:
        raise ModelStateError(model, changed)


def _forward_location(model: torch.nn.Module) -> SourceLocation | None:
    function = getattr(getattr(model, "forward", None), "__func__", None)
    code = getattr(function, "__code__", None)
    return SourceLocation(code.co_filename, code.co_firstlineno) if code is not None else None


class TrainingModeError(UnsupportedError, ValueError):
    """The model (or a submodule) is in training mode: dycl compiles inference only.

    A ``ValueError`` (the argument is in a state the call cannot take) and an
    ``UnsupportedError`` (what dycl's callers already catch for "cannot compile")."""

    def __init__(self, model: torch.nn.Module, training: list[str]) -> None:
        shown = ", ".join(repr(name or "<model>") for name in training[:4])
        more = f" and {len(training) - 4} more" if len(training) > 4 else ""
        super().__init__(f"a model in training mode (train() is set on {shown}{more})", _forward_location(model),
                         "call model.eval() first, or pass mode='eval' to compile eval semantics "
                         "(dropout off, batch-norm running statistics, self.training == False) "
                         "without changing the model")


class ModelStateError(UnsupportedError):
    """Running the model's statements while compiling changed its parameters, buffers or attributes."""

    def __init__(self, model: torch.nn.Module, changed: list[str]) -> None:
        shown = "; ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
        super().__init__(f"a forward() that changes module state ({shown})", _forward_location(model),
                         "dycl compiles module state as constants: keep per-call state in local variables "
                         "and return it, or update it outside the compiled model (the model was restored)")
