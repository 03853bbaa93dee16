"""Running the user's model eagerly on the example (and on a derived batch) for dycl.

Assumes the model is in the state compiling wants (``dycl.model.model_state.preserved``).
Guarantees: the model's own ``print`` is silent (``dycl.model.quiet``); an exception from
the user's code or from torch under it is raised again as the same exception type
with one message that says it happened while running the model on the example, what
torch said, and the user's innermost line (``file.py:42  code``) — not thirty frames
of dycl and torch. ``batch_failure`` says whether a model that runs at the example's
batch fails at another batch size (``dycl.model.batch_check`` acts on it).
"""

from __future__ import annotations

import importlib.util
import linecache
import os
import traceback
from collections.abc import Mapping
from typing import Any

import torch

from dycl.model.quiet import muted
from dycl.rewriter.errors import UnsupportedError


def _folders(*packages: str) -> tuple[str, ...]:
    """Where the packages' files are (found without importing them: no import edge)."""
    found = []
    for name in packages:
        spec = importlib.util.find_spec(name)
        found += [os.path.abspath(folder) + os.sep for folder in (spec.submodule_search_locations or [])]
    return tuple(found)


#: where frames are not the user's: torch and dycl's packages (and the standard library, _STDLIB)
_NOT_USER = (os.path.dirname(torch.__file__) + os.sep, *_folders("dycl", "dycl.hcfg", "dycl.hostgen", "dycl.rewriter"))
_STDLIB = os.path.dirname(os.__file__) + os.sep


def _is_user(filename: str) -> bool:
    if filename.startswith("<") or filename.startswith(_NOT_USER):
        return False
    return not filename.startswith(_STDLIB) or "-packages" + os.sep in filename  # installed libraries count


def run_eagerly(model: torch.nn.Module, args: tuple, kwargs: Mapping[str, Any] | None = None) -> Any:
    """``model(*args, **kwargs)`` under ``torch.no_grad()`` with its prints silent."""
    with muted(), torch.no_grad():
        return model(*args, **dict(kwargs or {}))


def run_on_example(model: torch.nn.Module, args: tuple, kwargs: Mapping[str, Any] | None = None) -> Any:
    """``run_eagerly``, with a failure explained as the module docstring says."""
    try:
        return run_eagerly(model, args, kwargs)
    except UnsupportedError:
        raise
    except Exception as exc:  # noqa: BLE001 - raised again, same type, with the context added
        raise explained(exc) from None


def user_frame(exc: BaseException) -> traceback.FrameSummary | None:
    """The innermost frame of ``exc`` in the user's code (not torch, dycl or the standard library)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _is_user(f.filename)]
    return frames[-1] if frames else None


def explained(exc: Exception) -> Exception:
    """``exc`` again (same type where it can be built from a message), saying where it happened."""
    said = str(exc).strip().splitlines()
    frame = user_frame(exc)
    where = ""
    if frame is not None:
        code = (frame.line or linecache.getline(frame.filename, frame.lineno)).strip()
        where = f" (at {os.path.basename(frame.filename)}:{frame.lineno}: {code})"
    message = (f"while running your model on the example: {type(exc).__name__}: {said[0] if said else ''}"
               f"{where}; check the example's shape and dtype against what forward() expects")
    try:
        again = type(exc)(message)
    except Exception:  # noqa: BLE001 - an exception type that takes other arguments
        again = RuntimeError(message)
    again.__cause__ = None
    return again


def batch_failure(model: torch.nn.Module, args: tuple, kwargs: Mapping[str, Any] | None = None,
                  factor: int = 2) -> str | None:
    """None if eager runs at ``factor`` times the example's batch or if it fails on the example
    itself; else what it raised at the larger batch, in one line. The batch is dim 0 of the
    inputs that ``dycl.model.dynamic`` names ``batch`` (those whose leading size is the first tensor
    input's); every run is on copies, so the example is left as it was. The model's state must be
    saved and restored by the caller."""
    leading = next((v.shape[0] for v in (*args, *(kwargs or {}).values())
                    if isinstance(v, torch.Tensor) and v.dim()), None)

    def bigger(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.dim() and value.shape[0] == leading:
            return torch.cat([value] * factor)
        return value.clone() if isinstance(value, torch.Tensor) else value

    def same(value: Any) -> Any:
        return value.clone() if isinstance(value, torch.Tensor) else value

    try:
        run_eagerly(model, tuple(bigger(a) for a in args), {k: bigger(v) for k, v in (kwargs or {}).items()})
        return None
    except AssertionError:  # the model's own check on sizes: the host checks it per call (rewriter.asserts)
        return None
    except Exception as exc:  # noqa: BLE001 - the finding
        failure = exc
    try:
        run_eagerly(model, tuple(same(a) for a in args), {k: same(v) for k, v in (kwargs or {}).items()})
    except Exception:  # noqa: BLE001 - fails on the example too: compiling says so itself
        return None
    said = str(failure).strip().splitlines()
    frame = user_frame(failure)
    where = f" at {os.path.basename(frame.filename)}:{frame.lineno}" if frame is not None else ""
    return f"{type(failure).__name__}{where}: {said[0] if said else ''}"


__all__ = ["batch_failure", "explained", "run_eagerly", "run_on_example", "user_frame"]
