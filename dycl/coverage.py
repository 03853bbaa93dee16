"""Which branches the compiled program took: condition outcomes and sub-DNN calls.

The generated host's ``_forward`` is straight Python: each HCFG condition is one
``if <test>:  # file.py:line`` line whose then-block starts on the next line
(``hostgen.emit``), and each sub-DNN call is one line naming ``self._call[i]`` or
``self._variant(i, ...)``. ``HostCoverage`` reads that source once, and
``record`` runs one call under a line tracer restricted to the ``_forward``
frame: the line executed right after an ``if`` line says its outcome (the next
line: true; any other: false). Nothing in the generated code changes, so a host
costs nothing extra unless it is being recorded; a recorded call runs a few
microseconds slower per executed host line.

Assumes the host was emitted by ``hostgen`` (no ``elif``, no loops, one
statement per line); a ``_forward`` whose source does not match raises
``ValueError`` instead of guessing.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dycl.hostgen.names import FORWARD

# the where: ``file.py:line``, then the unrolled context in brackets if any (``rewriter.locations``)
_IF = re.compile(r"^\s*if (?P<test>.*?):(?:\s+# (?P<where>\S+:\d+(?: \[.*\])?))?\s*$")
_CALL = re.compile(r"self\._call\[(\d+)\]|self\._variant\((\d+),")


@dataclass(frozen=True)
class ConditionSite:
    """The ``number``-th condition of the host (program order), at the user's ``where``;
    ``code`` is the user's source line there when known, else the host's test."""

    number: int
    line: int
    test: str
    where: str
    code: str


@dataclass(frozen=True)
class Trace:
    """What one call did: each visited condition's outcome (in visit order) and the sub-DNNs it ran."""

    outcomes: tuple[tuple[int, bool], ...]
    ran: frozenset[int]


@dataclass
class Tally:
    """Coverage over many calls: per condition how many calls took each outcome."""

    sites: list[ConditionSite]
    sub_dnns: list[int]
    true: dict[int, int] = field(default_factory=dict)
    false: dict[int, int] = field(default_factory=dict)
    ran: dict[int, int] = field(default_factory=dict)
    paths: set[tuple[tuple[int, bool], ...]] = field(default_factory=set)

    def add(self, trace: Trace) -> None:
        for number, outcome in trace.outcomes:
            counts = self.true if outcome else self.false
            counts[number] = counts.get(number, 0) + 1
        for index in trace.ran:
            self.ran[index] = self.ran.get(index, 0) + 1
        self.paths.add(trace.outcomes)

    def conditions(self) -> list[dict[str, Any]]:
        return [{"condition": s.number, "where": s.where, "code": s.code, "test": s.test,
                 "true": self.true.get(s.number, 0), "false": self.false.get(s.number, 0)} for s in self.sites]

    def warnings(self) -> list[str]:
        found = []
        for row in self.conditions():
            where = f"condition {row['condition']} at {row['where'] or '?'} ({_short(row['code'])})"
            if not row["true"] and not row["false"]:
                found.append(f"{where} was never reached: the branches under it were not checked")
            elif not row["true"] or not row["false"]:
                taken, missing = ("true", "false") if row["true"] else ("false", "true")
                found.append(f"{where} was {taken} for every input that reached it: its {missing} branch "
                             "was not checked")
        never = [i for i in self.sub_dnns if not self.ran.get(i)]
        if never:
            found.append(f"sub-DNNs never run by any input: {', '.join(map(str, never))}")
        return found


def _short(text: str, limit: int = 48) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class HostCoverage:
    """Records the branches a host model's ``_forward`` takes (see the module docstring)."""

    def __init__(self, host_model: Any, host_source: str, code: Sequence[str] | None = None) -> None:
        """``code``: the user's source line of each condition in program order (the
        HCFG's ``conditions``), shown instead of the host's test when given."""
        self._code = getattr(type(host_model), FORWARD).__code__
        lines = host_source.splitlines()
        first = self._code.co_firstlineno
        if not lines[first - 1].lstrip().startswith(f"def {FORWARD}("):
            raise ValueError(f"the host source does not match its {FORWARD} (was host.py edited?)")
        self.sites: list[ConditionSite] = []
        self._site_at: dict[int, ConditionSite] = {}
        self._call_at: dict[int, int] = {}
        for number in range(first + 1, len(lines) + 1):
            text = lines[number - 1]
            if text and not text.startswith("        "):
                break  # the end of _forward's body
            match = _IF.match(text)
            if match:
                site = ConditionSite(len(self.sites), number, match["test"], match["where"] or "",
                                     f"if {match['test']}")
                self.sites.append(site)
                self._site_at[number] = site
            call = _CALL.search(text)
            if call:
                self._call_at[number] = int(call[1] or call[2])
        self.sub_dnns = sorted(set(self._call_at.values()))
        if code is not None and len(code) == len(self.sites):
            self.sites = [replace(site, code=text or site.code) for site, text in zip(self.sites, code)]
            self._site_at = {site.line: site for site in self.sites}

    def tally(self) -> Tally:
        return Tally(self.sites, self.sub_dnns)

    def record(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, Trace]:
        """Call ``fn(*args, **kwargs)`` (which runs the host) and return its result and ``Trace``."""
        code, site_at, call_at = self._code, self._site_at, self._call_at
        outcomes: list[tuple[int, bool]] = []
        ran: set[int] = set()
        pending: list[int] = []  # the line of an ``if`` whose outcome the next line tells

        def in_forward(frame, event, arg):
            if event == "line":
                line = frame.f_lineno
                if pending:
                    outcomes.append((site_at[pending[0]].number, line == pending[0] + 1))
                    pending.clear()
                if line in site_at:
                    pending.append(line)
                elif line in call_at:
                    ran.add(call_at[line])
            return in_forward

        def dispatch(frame, event, arg):
            return in_forward if frame.f_code is code else None

        previous = sys.gettrace()
        sys.settrace(dispatch)
        try:
            result = fn(*args, **kwargs)
        finally:
            sys.settrace(previous)
        return result, Trace(tuple(outcomes), frozenset(ran))


def compiled_coverage(compiled: Any, inputs: Iterable[tuple[Any, ...]]) -> Tally:
    """The coverage of ``compiled`` (a ``dycl.CompiledModel``) over ``inputs`` (argument tuples)."""
    recorder = HostCoverage(compiled._host, compiled.host_source, user_code(compiled))
    tally = recorder.tally()
    for args in inputs:
        tally.add(recorder.record(compiled, *args)[1])
    return tally


def user_code(compiled: Any) -> list[str] | None:
    """The user's source line of each condition of an in-process ``CompiledModel``
    (None for a loaded artifact, which keeps only ``file:line``)."""
    result = getattr(compiled, "_result", None)
    if result is None:
        return None
    lines = []
    for cond in result.graph.conditions:
        location = result.rewritten.locations.resolve(cond.statement)
        lines.append(location.source_line().strip() if location else "")
    return lines


__all__ = ["ConditionSite", "HostCoverage", "Tally", "Trace", "compiled_coverage", "user_code"]
