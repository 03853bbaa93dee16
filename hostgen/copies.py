"""Real modules whose source every generated host holds a copy of.

The host runtime is written as ordinary modules (linted, imported by tests and by dycl's
in-process models) and copied into ``host.py`` as text, so the torch-free host and dycl run
the same code. A copy leaves out the module's docstring (the host has its own) and every line
that ends with ``# dycl only`` (an import of dycl, which the host must not make, or a stand-in
for a name the host defines elsewhere), with the blank lines that would pile up where they were.

Assumes the copied module imports nothing of dycl except on ``# dycl only`` lines and does
not rely on ``from __future__`` flags (the host is compiled without them)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

#: the comment that ends each line of a copied module that only dycl's copy keeps
DYCL_ONLY = "# dycl only"


def copied(path: str | Path) -> str:
    """The source of the module at ``path`` as the host holds it."""
    return _copy_of(Path(path).read_text())


@functools.lru_cache(maxsize=32)
def _copy_of(source: str) -> str:
    """``copied`` of a module's text; kept per text (every compile copies the same modules)."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    if tree.body and isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Constant):
        lines = lines[tree.body[0].end_lineno:]  # the docstring
    kept: list[str] = []
    removed = False  # a line was left out since the last line of code kept
    for line in lines:
        piled = len(kept) >= 2 and not kept[-1].strip() and not kept[-2].strip()
        if line.rstrip().endswith(DYCL_ONLY) or removed and not line.strip() and piled:
            removed = True
            continue  # a removed line, and blank lines it would pile up beyond two
        removed = removed and not line.strip()
        kept.append(line)
    return "".join(kept).strip("\n") + "\n"


__all__ = ["DYCL_ONLY", "copied"]
