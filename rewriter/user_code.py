"""Which Python code is the user's: the code dycl reads and rewrites, as opposed to torch's,
the standard library's and installed libraries' (traced into a sub-DNN as they are).

Library code that decides on data is *followed* (rewritten like user code, see
``dycl.model.library_decisions``): ``followable`` says which files may be, ``library_callers``
which functions on a call stack are. Frames of torch, the standard library and dycl itself are
never followed.

Assumes installed packages live under the interpreter's ``purelib``/``platlib`` paths and the
standard library under ``stdlib``; an editable install of a package of the user's own counts
as the user's code, since its source lies outside those paths."""

from __future__ import annotations

import functools
import inspect
import os
import sysconfig
import types

import torch

_LIBRARY_PATHS = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")})
_STDLIB = os.path.dirname(os.__file__) + os.sep
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
# installed, this module is dycl/rewriter/user_code.py: dycl's own files lie under that dycl/; in a
# checkout they lie outside every library path, so they are never followed either way
_OWN = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_DYCL_DIR = _OWN + os.sep if os.path.basename(_OWN) == "dycl" else None


@functools.lru_cache(maxsize=4096)
def is_user_code(obj: object) -> bool:
    """Whether ``obj`` (a function or class) comes from outside torch and the
    installed libraries, i.e. is model code dycl should look into."""
    module = getattr(obj, "__module__", "") or ""
    if module.split(".")[0] in ("torch", "builtins", "math", "numpy") or getattr(obj, "traced_as_library", False):
        return False
    try:
        path = inspect.getsourcefile(obj) or ""
    except TypeError:  # a built-in
        return False
    except OSError:  # a class defined in a notebook or at the prompt: its module has no file
        return isinstance(obj, type) and module == "__main__"
    return not in_library(path)


def in_library(path: str) -> bool:
    """Whether the file ``path`` belongs to the standard library or an installed package."""
    return path.startswith(_LIBRARY_PATHS)


def followable(path: str) -> bool:
    """Whether the file ``path`` is an installed package's whose functions dycl may rewrite like
    user code: not torch's, not the standard library's, not dycl's own."""
    return (in_library(path) and not path.startswith(_TORCH_DIR)
            and (not path.startswith(_STDLIB) or "-packages" + os.sep in path)
            and (_DYCL_DIR is None or not path.startswith(_DYCL_DIR)))


def library_callers(frame: types.FrameType | None, outer: types.FrameType) -> frozenset[types.CodeType]:
    """The code of every followable frame from ``frame`` out to ``outer`` (excluded; the frame of
    dycl's that runs the model): the library function that runs at ``frame`` and every library
    function, decorator wrappers included, that leads to it from the model's code. Nothing
    where ``outer`` is not on the stack: the frames beyond the compile (a test runner, the
    user's script) are never followed."""
    found: set[types.CodeType] = set()
    while frame is not None and frame is not outer:
        if followable(frame.f_code.co_filename):
            found.add(frame.f_code)
        frame = frame.f_back
    return frozenset(found) if frame is outer else frozenset()


__all__ = ["followable", "in_library", "is_user_code", "library_callers"]
