"""Errors the rewriter raises for programs it cannot compile, and the warning for a
dim dycl compiles static although it was asked to keep it symbolic."""

from __future__ import annotations

import linecache
from dataclasses import dataclass


@dataclass(frozen=True)
class SourceLocation:
    """A line in the user's source: ``path`` is the file as Python knows it."""

    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"

    def source_line(self) -> str:
        return linecache.getline(self.path, self.line).rstrip("\n")


class UnsupportedError(Exception):
    """A construct dycl cannot compile, with where it is and how to avoid it.

    ``construct`` names the construct ("try statement", "recursion", ...);
    ``location`` is the user's file:line (None only when no source exists).
    """

    def __init__(self, construct: str, location: SourceLocation | None, hint: str = "") -> None:
        self.construct = construct
        self.location = location
        self.hint = hint
        super().__init__(self._format())

    def _format(self) -> str:
        where = f" at {self.location}" if self.location else ""
        lines = [f"dycl cannot compile {self.construct}{where}"]
        if self.location is not None:
            text = self.location.source_line()
            if text:
                indent = len(text) - len(text.lstrip())
                gutter = f"{self.location.line:>6} | "
                lines.append(gutter + text)
                lines.append(" " * (len(gutter) + indent) + "^")
        if self.hint:
            lines.append(f"hint: {self.hint}")
        return "\n".join(lines)


class SpecialisationWarning(UserWarning):
    """A dim the user left symbolic that dycl compiles static at the example's size,
    because some code's structure follows it (``torch.split`` along the batch gives a
    number of pieces per size); the compiled model then refuses every other size."""
