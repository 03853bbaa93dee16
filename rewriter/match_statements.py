"""Lower ``match`` statements on values to ``if``/``elif`` chains, when a function is parsed.

``match int(x.sum() > 0): case 1: ... case _: ...`` is an ``if`` chain on the subject, which
the passes already compile (the subject may come from data: its tests become conditions). The
subject is evaluated once, into a fresh name, as ``match`` evaluates it once.

Assumes: ``definition`` carries location comments (``annotate_locations``); it runs before
``RejectUnsupported``.
Guarantees: a ``match`` whose every case is a value pattern (``case 1``, ``case Mode.UP``,
``case "relu"``: ``==``), a singleton (``case None``: ``is``), an or-pattern of those, a capture
or the wildcard (``case _``, ``case y``: always matches, ``y`` bound to the subject), each with
an optional guard (not after a capture), becomes ``subject = <expr>`` and an ``if``/``elif``/
``else`` chain testing the cases in order with the same bodies — Python's semantics for these
patterns. Any other ``match`` (sequence, mapping or class patterns) is left as it is, for
``RejectUnsupported`` to refuse at its line. Each generated line carries the location of the
first line of the case it comes from.
"""

from __future__ import annotations

import libcst as cst
from dycl.rewriter.locations import comment_of, set_location
from dycl.rewriter.walk import descendants


class _NotLowered(Exception):
    """A pattern outside the supported forms."""


def lower_match_statements(definition: cst.FunctionDef) -> cst.FunctionDef:
    """``definition`` with its value ``match`` statements lowered (see the module note)."""
    if not any(isinstance(node, cst.Match) for node in descendants(definition)):
        return definition
    taken = {node.value for node in descendants(definition) if isinstance(node, cst.Name)}
    return definition.visit(_LowerMatch(taken))


class _LowerMatch(cst.CSTTransformer):
    def __init__(self, taken: set[str]) -> None:
        super().__init__()
        self.taken = taken

    def fresh(self) -> str:
        index = 0
        while f"match_subject{index or ''}" in self.taken:
            index += 1
        name = f"match_subject{index or ''}"
        self.taken.add(name)
        return name

    def leave_Match(self, original: cst.Match, updated: cst.Match
                    ) -> cst.Match | cst.FlattenSentinel[cst.BaseStatement]:
        subject = self.fresh()
        try:
            cases = [_case(case, cst.Name(subject)) for case in updated.cases]
        except _NotLowered:
            return updated
        where = comment_of(updated.cases[0].body.body[0]) if updated.cases[0].body.body else None
        first = set_location(cst.SimpleStatementLine(
            [cst.Assign([cst.AssignTarget(cst.Name(subject))], updated.subject)]), where)
        return cst.FlattenSentinel([first, *_chain(cases)])


def _case(case: cst.MatchCase, subject: cst.Name) -> tuple[cst.BaseExpression | None, list[cst.BaseStatement]]:
    """The case's test (None: always true) and its body, with a capture's binding first."""
    if not isinstance(case.body, cst.IndentedBlock):
        raise _NotLowered  # `case 1: x = y` on one line: left to RejectUnsupported
    test, captured = _pattern(case.pattern, subject)
    body = list(case.body.body)
    where = comment_of(body[0]) if body else None
    if captured is not None:
        if case.guard is not None:
            raise _NotLowered  # the guard reads the capture, bound only if the pattern matches
        body = [set_location(cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(captured))], subject)]),
                             where), *body]
    if case.guard is not None:
        guard = _parenthesised(case.guard)
        test = guard if test is None else cst.BooleanOperation(_parenthesised(test), cst.And(), guard)
    return test, body


def _pattern(pattern: cst.MatchPattern, subject: cst.Name) -> tuple[cst.BaseExpression | None, str | None]:
    if isinstance(pattern, cst.MatchValue):
        return cst.Comparison(subject, [cst.ComparisonTarget(cst.Equal(), _parenthesised(pattern.value))]), None
    if isinstance(pattern, cst.MatchSingleton):
        return cst.Comparison(subject, [cst.ComparisonTarget(cst.Is(), pattern.value)]), None
    if isinstance(pattern, cst.MatchAs) and pattern.pattern is None:
        return None, pattern.name.value if pattern.name is not None else None
    if isinstance(pattern, cst.MatchOr):
        tests = [_pattern(element.pattern, subject) for element in pattern.patterns]
        if any(test is None or captured is not None for test, captured in tests):
            raise _NotLowered
        combined = _parenthesised(tests[0][0])
        for test, _ in tests[1:]:
            combined = cst.BooleanOperation(combined, cst.Or(), _parenthesised(test))
        return combined, None
    raise _NotLowered


def _parenthesised(node: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(node, (cst.Name, cst.Attribute, cst.Integer, cst.Float, cst.SimpleString, cst.Call)):
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _chain(cases: list[tuple[cst.BaseExpression | None, list[cst.BaseStatement]]]) -> list[cst.BaseStatement]:
    """``if``/``elif``/``else`` over ``cases``; the cases after one that always matches never run."""
    test, body = cases[0]
    if test is None:
        return body or [cst.SimpleStatementLine([cst.Pass()])]
    rest = _chain(cases[1:]) if len(cases) > 1 else []
    where = comment_of(body[0]) if body else None
    orelse = cst.Else(cst.IndentedBlock(rest)) if rest else None
    return [set_location(cst.If(test, cst.IndentedBlock(body or [cst.SimpleStatementLine([cst.Pass()])]),
                                orelse=orelse), where)]
