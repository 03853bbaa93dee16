"""Provenance: every statement carries the user's file:line as a trailing comment.

Note: why locations live in comments. libcst nodes are immutable and every pass
rebuilds the nodes it touches, so a side table keyed by node identity would be
lost. A trailing ``# file.py:42`` comment travels with its statement through
every copy (unrolled iterations, inlined bodies) and stays readable in the
output. User comments are dropped first, so every comment the rewriter sees is
one of these.
"""

from __future__ import annotations

import re

import libcst as cst
from dycl.rewriter.errors import SourceLocation
from libcst.metadata import MetadataWrapper, PositionProvider

_LOCATION = re.compile(r"#\s*(?P<label>\S+):(?P<line>\d+)\s*$")

COMPOUND = (cst.If, cst.For, cst.While, cst.With, cst.Try, cst.FunctionDef, cst.ClassDef)


def location_comment(label: str, line: int) -> cst.Comment:
    return cst.Comment(f"# {label}:{line}")


def _with_comment(ws: cst.TrailingWhitespace, comment: cst.Comment | None) -> cst.TrailingWhitespace:
    return ws.with_changes(whitespace=cst.SimpleWhitespace("  " if comment else ""), comment=comment)


def set_location(stmt: cst.BaseStatement, comment: cst.Comment | None) -> cst.BaseStatement:
    """Return ``stmt`` with its location comment replaced by ``comment``."""
    if isinstance(stmt, cst.SimpleStatementLine):
        return stmt.with_changes(trailing_whitespace=_with_comment(stmt.trailing_whitespace, comment))
    if isinstance(stmt, COMPOUND) and isinstance(stmt.body, cst.IndentedBlock):
        return stmt.with_changes(body=stmt.body.with_changes(header=_with_comment(stmt.body.header, comment)))
    return stmt


def comment_of(stmt: cst.CSTNode) -> cst.Comment | None:
    """The location comment of a statement (None for generated code without one)."""
    if isinstance(stmt, cst.SimpleStatementLine):
        return stmt.trailing_whitespace.comment
    body = getattr(stmt, "body", None)
    if isinstance(body, cst.IndentedBlock):
        return body.header.comment
    return None


class _AnnotateLocations(cst.CSTTransformer):
    """Stamp statements with their original line; drop user comments; give every
    statement a line of its own (``a = 1; b = 2`` and ``if c: return x`` are split)."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, label: str, first_line: int) -> None:
        super().__init__()
        self.label = label
        self.offset = first_line - 1

    def _comment(self, original: cst.CSTNode) -> cst.Comment:
        line = self.get_metadata(PositionProvider, original).start.line + self.offset
        return location_comment(self.label, line)

    def leave_EmptyLine(self, original: cst.EmptyLine, updated: cst.EmptyLine):
        return cst.RemoveFromParent()

    def leave_TrailingWhitespace(self, original, updated: cst.TrailingWhitespace):
        return _with_comment(updated, None)

    def leave_SimpleStatementLine(self, original, updated):
        comment = self._comment(original)
        lines = [cst.SimpleStatementLine([small.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)])
                 for small in updated.body]
        lines = [set_location(line, comment) for line in lines]
        return lines[0] if len(lines) == 1 else cst.FlattenSentinel(lines)

    def leave_SimpleStatementSuite(self, original, updated):
        comment = self._comment(original)
        lines = [set_location(cst.SimpleStatementLine([s.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)]),
                              comment) for s in updated.body]
        return cst.IndentedBlock(body=lines)

    def _leave_compound(self, original, updated):
        return set_location(updated, self._comment(original))

    leave_If = leave_For = leave_While = leave_With = leave_Try = _leave_compound
    leave_FunctionDef = leave_ClassDef = _leave_compound


def annotate_locations(module: cst.Module, label: str, first_line: int) -> cst.Module:
    """Strip user comments, then stamp every statement with ``# label:line``,
    where ``line`` counts from ``first_line`` (the snippet's first line in its file)."""
    return MetadataWrapper(module).visit(_AnnotateLocations(label, first_line))


class LocationTable:
    """Maps the short labels used in comments back to full file paths."""

    def __init__(self) -> None:
        self._paths: dict[str, str] = {}

    def label_for(self, path: str) -> str:
        for label, known in self._paths.items():
            if known == path:
                return label
        base = path.replace("\\", "/").rsplit("/", 1)[-1]
        label = base
        n = 2
        while label in self._paths:
            label = f"{base}#{n}"
            n += 1
        self._paths[label] = path
        return label

    def resolve(self, stmt: cst.CSTNode | None) -> SourceLocation | None:
        comment = comment_of(stmt) if stmt is not None else None
        if comment is None:
            return None
        match = _LOCATION.match(comment.value)
        if match is None:
            return None
        label = match.group("label")
        return SourceLocation(self._paths.get(label, label), int(match.group("line")))

    def strip(self, source: str) -> str:
        """``source`` without location comments (for golden tests and display)."""
        return "\n".join(_LOCATION.sub("", line).rstrip() for line in source.split("\n"))
