"""Identify the execution path an eager call takes, for counting distinct paths.

A *path* is the sequence of source lines executed inside the model's own Python
code (the files that define the model's classes and helper functions), recorded
with ``sys.settrace``. Two calls take the same path exactly when they execute the
same lines in the same order, so loop trip counts, early exits and skipped blocks
all distinguish paths. Library code (torch, numpy) is not traced.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Callable, Iterable
from typing import Any

import torch

from dycl.rewriter.arguments import positional_arguments

Path = tuple[tuple[str, int], ...]


def model_source_files(model: torch.nn.Module) -> frozenset[str]:
    """The files defining the classes of ``model`` and of all its submodules,
    excluding torch's own modules."""
    files: set[str] = set()
    for module in model.modules():
        for cls in type(module).__mro__:
            if cls.__module__.startswith("torch") or cls is object:
                continue
            with contextlib.suppress(TypeError, OSError):  # a class defined in a notebook has no module file
                files.add(inspect.getfile(cls))
            # its methods' code names the file they run from in every case
            files.update(value.__code__.co_filename for value in vars(cls).values() if hasattr(value, "__code__"))
    return frozenset(files)


def record_path(fn: Callable[..., Any], *args: Any, files: Iterable[str], **kwargs: Any) -> tuple[Any, Path]:
    """Call ``fn(*args, **kwargs)`` and return ``(result, path)`` where ``path`` is
    the sequence of ``(file, line)`` events executed in ``files``."""
    watched = frozenset(files)
    events: list[tuple[str, int]] = []

    def local_tracer(frame, event, arg):
        if event == "line":
            events.append((frame.f_code.co_filename, frame.f_lineno))
        return local_tracer

    def global_tracer(frame, event, arg):
        if frame.f_code.co_filename in watched:
            return local_tracer
        return None

    previous = sys.gettrace()
    sys.settrace(global_tracer)
    try:
        result = fn(*args, **kwargs)
    finally:
        sys.settrace(previous)
    return result, tuple(events)


def count_paths(model: torch.nn.Module, inputs: Iterable[Any]) -> int:
    """Number of distinct eager execution paths of ``model`` over ``inputs``
    (each input a tensor or a tuple of positional arguments)."""
    files = model_source_files(model)
    seen: set[Path] = set()
    with torch.no_grad():
        for item in inputs:
            args = positional_arguments(item)
            _, path = record_path(model, *args, files=files)
            seen.add(path)
    return len(seen)
