"""Provenance: every statement carries the user's file:line as a trailing comment.

Note: why locations live in comments. libcst nodes are immutable and every pass
rebuilds the nodes it touches, so a side table keyed by node identity would be
lost. A trailing ``# file.py:42`` comment travels with its statement through
every copy (unrolled iterations, inlined bodies) and stays readable in the
output. User comments are dropped first, so every comment the rewriter sees is
one of these.

Note: how statements find their lines. libcst's ``PositionProvider`` costs a deep
copy and a code generation of the whole tree, so ``annotate_locations`` reads the
lines from Python's ``ast`` of the same text instead, walking both statement
structures side by side (one ast statement per small statement, one per compound
statement, the same nesting); when they disagree it raises ``StructureMismatch``
rather than guess. Only statements are rebuilt: a comment, blank line or trailing
whitespace can sit inside an expression only where brackets break a line, so only
a statement (or a compound statement's header) whose lines show one is walked node
by node to strip it. The output is the one the former whole-tree transformer gave,
byte for byte (``tests/rewriter/test_locations.py`` keeps it as the reference).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Sequence

import libcst as cst
from dycl.rewriter.errors import SourceLocation

_LOCATION = re.compile(r"#\s*(?P<label>\S+):(?P<line>\d+)(?:\s+\[(?P<context>.*)\])?\s*$")
_NEWLINE = re.compile(r"\r\n?|\n")  # Python's line ends, as ast counts them

COMPOUND = (cst.If, cst.For, cst.While, cst.With, cst.Try, cst.FunctionDef, cst.ClassDef)


def location_comment(label: str, line: int) -> cst.Comment:
    return cst.Comment(f"# {label}:{line}")


# Note: the unrolled context. A statement copied into an unrolled iteration keeps its line
# and gains the iteration's bindings in brackets, outer loop first: ``# net.py:90 [g=0, i=1]``
# (``rewriter.unroll``). Conditions that share a line are told apart by it in the coverage
# report, the HCFG picture and the host's comments, which all read these comments.

class _AddContext(cst.CSTTransformer):
    def __init__(self, context: str) -> None:
        super().__init__()
        self.context = context

    def leave_Comment(self, original: cst.Comment, updated: cst.Comment) -> cst.Comment:
        match = _LOCATION.match(updated.value)
        if match is None:
            return updated
        inner = f", {match['context']}" if match["context"] else ""
        return cst.Comment(f"# {match['label']}:{match['line']} [{self.context}{inner}]")


def with_context(block: Sequence[cst.BaseStatement], context: str) -> list[cst.BaseStatement]:
    """``block`` with ``context`` (``i=7``) put first in the brackets of every location comment
    in it, nested statements included (see the note above)."""
    transformer = _AddContext(context)
    return [stmt.visit(transformer) for stmt in block]


def context_of(comment: cst.Comment | None) -> str:
    """The unrolled context in a location comment (``g=0, i=1``); "" if none."""
    match = _LOCATION.match(comment.value) if comment is not None else None
    return (match["context"] or "") if match is not None else ""


def split_where(where: str) -> tuple[str, str]:
    """``"net.py:90 [g=0, i=1]"`` -> ``("net.py:90", "g=0, i=1")``; no brackets: context ""."""
    match = _LOCATION.match(f"# {where}")
    if match is None:
        return where, ""
    return f"{match['label']}:{match['line']}", match["context"] or ""


def _trailing(comment: cst.Comment | None) -> cst.TrailingWhitespace:
    return cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  " if comment else ""), comment=comment)


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


class StructureMismatch(AssertionError):
    """libcst and ast read the same source as different statements (an internal error)."""


_SMALL: dict[type, type] = {
    cst.Expr: ast.Expr, cst.Assign: ast.Assign, cst.AnnAssign: ast.AnnAssign, cst.AugAssign: ast.AugAssign,
    cst.Return: ast.Return, cst.Raise: ast.Raise, cst.Assert: ast.Assert, cst.Del: ast.Delete,
    cst.Pass: ast.Pass, cst.Break: ast.Break, cst.Continue: ast.Continue, cst.Global: ast.Global,
    cst.Nonlocal: ast.Nonlocal, cst.Import: ast.Import, cst.ImportFrom: ast.ImportFrom,
}
if hasattr(ast, "TypeAlias"):  # Python 3.12
    _SMALL[cst.TypeAlias] = ast.TypeAlias

_COMPOUND: dict[type, tuple[type, ...]] = {
    cst.If: (ast.If,), cst.For: (ast.For, ast.AsyncFor), cst.While: (ast.While,),
    cst.With: (ast.With, ast.AsyncWith), cst.Try: (ast.Try,), cst.TryStar: (ast.TryStar,),
    cst.FunctionDef: (ast.FunctionDef, ast.AsyncFunctionDef), cst.ClassDef: (ast.ClassDef,),
    cst.Match: (ast.Match,),
}

# what a header's walk leaves alone: the bodies and clauses, which _Annotator rebuilds
_NESTED = (cst.BaseSuite, cst.BaseStatement, cst.Else, cst.Finally, cst.ExceptHandler, cst.ExceptStarHandler,
           cst.MatchCase)


class _StripComments(cst.CSTTransformer):
    """Drop the comments and blank lines of one node, not descending into the
    statements, bodies and clauses nested in it."""

    def __init__(self, root: cst.CSTNode) -> None:
        super().__init__()
        self._root = root

    def on_visit(self, node: cst.CSTNode) -> bool:
        return node is self._root or not isinstance(node, _NESTED)

    def leave_EmptyLine(self, original: cst.EmptyLine, updated: cst.EmptyLine) -> cst.RemovalSentinel:
        return cst.RemoveFromParent()

    def leave_TrailingWhitespace(self, original: cst.TrailingWhitespace,
                                 updated: cst.TrailingWhitespace) -> cst.TrailingWhitespace:
        return _with_comment(updated, None)


def _stripped(node: cst.CSTNode) -> cst.CSTNode:
    return node.visit(_StripComments(node))


class _Annotator:
    """The parallel walk of libcst and ast statements behind ``annotate_locations``."""

    def __init__(self, source: str, label: str, first_line: int) -> None:
        self.lines = _NEWLINE.split(source)
        self.label = label
        self.offset = first_line - 1

    def comment(self, node: ast.stmt) -> cst.Comment:
        return location_comment(self.label, node.lineno + self.offset)

    def block(self, stmts: Sequence[cst.BaseStatement], nodes: list[ast.stmt]) -> list[cst.BaseStatement]:
        out: list[cst.BaseStatement] = []
        i = 0
        for stmt in stmts:
            if isinstance(stmt, cst.SimpleStatementLine):
                k = len(stmt.body)
                out.extend(self.simple(stmt.body, nodes[i:i + k]))
                i += k
            else:
                _expect(i < len(nodes), "a compound statement ast lacks", nodes)
                out.append(self.compound(stmt, nodes[i]))
                i += 1
        _expect(i == len(nodes), "statements libcst lacks", nodes[i:])
        return out

    def simple(self, smalls: Sequence[cst.BaseSmallStatement], nodes: list[ast.stmt]
               ) -> Iterator[cst.SimpleStatementLine]:
        """One line per small statement (``a = 1; b = 2`` is split), all stamped with the line it started on."""
        _expect(len(smalls) == len(nodes) and all(_SMALL.get(type(s)) is type(n) for s, n in zip(smalls, nodes)),
                "different small statements", nodes)
        plain = self.plain(nodes[0].lineno, nodes[-1].end_lineno)
        comment = self.comment(nodes[0])
        for small in smalls:
            if not plain:
                small = _stripped(small)
            if small.semicolon is not cst.MaybeSentinel.DEFAULT:
                small = small.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
            yield cst.SimpleStatementLine([small], trailing_whitespace=_trailing(comment))

    def body(self, suite: cst.BaseSuite, nodes: list[ast.stmt], comment: cst.Comment | None) -> cst.IndentedBlock:
        """``suite`` as an indented block whose header carries ``comment``."""
        if isinstance(suite, cst.SimpleStatementSuite):
            return cst.IndentedBlock(body=list(self.simple(suite.body, nodes)),
                                     header=_trailing(comment))
        return suite.with_changes(header=_with_comment(suite.header, comment), body=self.block(suite.body, nodes),
                                  footer=())

    def rebuilt(self, stmt: cst.CSTNode, start: int, suite: cst.BaseSuite, nodes: list[ast.stmt],
                changes: dict[str, object]) -> cst.CSTNode:
        """``stmt`` with ``changes``, without its leading lines and, where its header
        (starting on line ``start``) spans several lines, without the comments and
        blank lines inside it."""
        first = nodes[0].lineno
        end = first if isinstance(suite, cst.SimpleStatementSuite) else first - 1  # header, maybe comments after
        if getattr(stmt, "decorators", ()) or not (self.header_on_one_line(start, suite, nodes)
                                                    or self.plain(start, end)):
            return _stripped(stmt).with_changes(**changes)
        changes["leading_lines"] = ()
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            changes["lines_after_decorators"] = ()
        return stmt.with_changes(**changes)

    def plain(self, first: int, last: int) -> bool:
        """Whether lines ``first`` to ``last`` hold no comment, blank line or trailing
        whitespace: if so, the statement on them has nothing to strip (True only when sure)."""
        return first == last or not any("#" in line or not line or line[-1].isspace()
                                        for line in self.lines[first - 1:last])

    def header_on_one_line(self, start: int, suite: cst.BaseSuite, nodes: list[ast.stmt]) -> bool:
        """Whether the header starting on line ``start`` ends there (True only when sure).
        Brackets that break a line outside a string put every line after the break
        outside strings too, so the line holding the ``:`` (before the body's first
        line) then has code: it is neither blank nor a comment."""
        first = nodes[0].lineno
        if isinstance(suite, cst.SimpleStatementSuite):
            return first == start
        return all(not text or text.startswith("#") for text in (line.lstrip() for line in self.lines[start:first - 1]))

    def compound(self, stmt: cst.BaseCompoundStatement, node: ast.stmt) -> cst.BaseCompoundStatement:
        _expect(isinstance(node, _COMPOUND.get(type(stmt), ())), f"a {type(stmt).__name__}", [node])
        if isinstance(stmt, cst.Match):
            _expect(len(stmt.cases) == len(node.cases), "different match cases", [node])
            return _stripped(stmt).with_changes(cases=[self.case(c, n) for c, n in zip(stmt.cases, node.cases)])
        comment = self.comment(node) if isinstance(stmt, COMPOUND) else None  # as always: not TryStar, Match
        changes: dict[str, object] = {"body": self.body(stmt.body, node.body, comment)}
        if isinstance(stmt, cst.If) and isinstance(stmt.orelse, cst.If):
            _expect(len(node.orelse) == 1, "an elif", node.orelse)
            changes["orelse"] = self.compound(stmt.orelse, node.orelse[0])
        elif isinstance(stmt, (cst.If, cst.For, cst.While, cst.Try, cst.TryStar)):
            changes["orelse"] = self.clause(stmt.orelse, node.orelse)
        if isinstance(stmt, (cst.Try, cst.TryStar)):  # ``try:`` has no brackets to hold a comment
            _expect(len(stmt.handlers) == len(node.handlers), "different except clauses", [node])
            changes["handlers"] = [self.handler(h, n) for h, n in zip(stmt.handlers, node.handlers)]
            changes["finalbody"] = self.clause(stmt.finalbody, node.finalbody)
            return stmt.with_changes(leading_lines=(), **changes)
        return self.rebuilt(stmt, node.lineno, stmt.body, node.body, changes)

    def clause(self, clause: cst.Else | cst.Finally | None, nodes: list[ast.stmt]) -> cst.Else | cst.Finally | None:
        _expect((clause is None) == (not nodes), "an else or finally clause", nodes)
        if clause is None:
            return None
        return clause.with_changes(leading_lines=(), body=self.body(clause.body, nodes, None))

    def handler(self, handler: cst.ExceptHandler | cst.ExceptStarHandler, node: ast.ExceptHandler
                ) -> cst.ExceptHandler | cst.ExceptStarHandler:
        changes: dict[str, object] = {"body": self.body(handler.body, node.body, None)}
        return self.rebuilt(handler, node.lineno, handler.body, node.body, changes)

    def case(self, case: cst.MatchCase, node: ast.match_case) -> cst.MatchCase:
        # ast gives a case no line of its own (its pattern's excludes brackets): always walked
        return _stripped(case).with_changes(body=self.body(case.body, node.body, None))


def _expect(holds: bool, what: str, nodes: list[ast.stmt]) -> None:
    if not holds:
        where = f" at line {nodes[0].lineno}" if nodes else ""
        raise StructureMismatch(f"libcst and ast disagree{where}: {what}")


_ESCAPE = re.compile(r"\\(.)")  # not a backslash ending a line
_VALID_ESCAPES = frozenset("\r\\'\"abfnrtv01234567xNuU")


def _statements(source: str) -> list[ast.stmt]:
    """``source``'s statements as ast reads them, without warning again about an
    invalid escape (``"\\d"``) Python warned about when it compiled the user's file:
    such a backslash is doubled first, which moves no line."""
    if "\\" in source:
        source = _ESCAPE.sub(lambda m: m[0] if m[1] in _VALID_ESCAPES else "\\" + m[0], source)
    return ast.parse(source).body


def annotate_locations(module: cst.Module, source: str, label: str, first_line: int) -> cst.Module:
    """Strip user comments, then stamp every statement with ``# label:line``,
    where ``line`` counts from ``first_line`` (the snippet's first line in its file).
    ``module`` is ``source`` parsed by libcst."""
    annotator = _Annotator(source, label, first_line)
    return module.with_changes(header=(), footer=(), body=annotator.block(module.body, _statements(source)))


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
