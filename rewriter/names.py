"""One namespace for every name the rewriter generates."""

from __future__ import annotations

import builtins
import keyword
import re


class Namespace:
    """Hands out identifiers that are unique within one rewritten function.

    Every name the user's code mentions is reserved up front (``reserve``), as
    are Python keywords and builtins, so a fresh name never shadows a user
    name or a builtin. ``fresh("out")`` returns ``out`` if it is free, else
    ``out_1``, ``out_2``, ... (the base keeps any existing ``_N`` suffix off).
    """

    _SUFFIX = re.compile(r"^(.*?)(?:_(\d+))?$")

    def __init__(self) -> None:
        self._taken: set[str] = set(keyword.kwlist) | set(dir(builtins))
        self._next_suffix: dict[str, int] = {}
        self.generated: set[str] = set()

    def reserve(self, name: str) -> None:
        self._taken.add(name)

    def is_taken(self, name: str) -> bool:
        return name in self._taken

    def fresh(self, base: str) -> str:
        stem = self._SUFFIX.match(base).group(1) or "v"
        if not stem.isidentifier():
            stem = "v"
        if stem not in self._taken:
            self._taken.add(stem)
            self.generated.add(stem)
            return stem
        suffix = self._next_suffix.get(stem, 1)
        while f"{stem}_{suffix}" in self._taken:
            suffix += 1
        self._next_suffix[stem] = suffix + 1
        name = f"{stem}_{suffix}"
        self._taken.add(name)
        self.generated.add(name)
        return name
