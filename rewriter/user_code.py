"""Which Python code is the user's: the code dycl reads and rewrites, as opposed to torch's,
the standard library's and installed libraries' (traced into a sub-DNN as they are).

Assumes installed packages live under the interpreter's ``purelib``/``platlib`` paths and the
standard library under ``stdlib``; an editable install of a package of the user's own counts
as the user's code, since its source lies outside those paths."""

from __future__ import annotations

import functools
import inspect
import sysconfig

_LIBRARY_PATHS = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")})


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


__all__ = ["in_library", "is_user_code"]
