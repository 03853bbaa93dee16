"""Which branches the compiled program took: condition outcomes and sub-DNN calls.

The emitter says what every line of the host's emitted method is (``hostgen.program``:
``HostProgram.conditions`` with the host line of each condition and the first line of its
true branch, ``HostProgram.calls`` with the line of each sub-DNN call). ``HostCoverage``
takes those tables, from the compile result in process or from the ``FORWARD_LINES`` table
a loaded host holds, and ``record`` runs one call under a line tracer restricted to frames
of that method: the line executed right after a condition's line says its outcome (the
first line of its true branch: true; any other: false). Nothing in the generated code
changes, so a host costs nothing extra unless it is being recorded; a recorded call runs a
few microseconds slower per executed host line. Each frame keeps its own pending condition,
so the interleaved per-sample generators of a batched host are recorded correctly.

A host whose control flow runs inside one graph (``Levers.single_graph``) has no lines for the
model's conditions: its program's ``decisions`` (``hostgen.decisions``) name the local that holds
their outcomes after the graph's call, and ``record`` reads it when the method returns and
replays the model's control flow on it: the same sites, outcomes, paths and sub-DNNs run as the
host form would record.

Assumes the host was emitted by ``hostgen`` (one method with the model's control flow, no
loops); never reads the host's source text.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dycl.hostgen.program import HostProgram


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
    """Records the branches a host model's emitted method takes (see the module docstring)."""

    def __init__(self, host_model: Any, host: HostProgram | str, code: Sequence[str] | None = None) -> None:
        """``host``: the ``HostProgram`` of ``host_model``, or its source, whose program is then
        read from the tables the host holds. ``code``: the user's source line of each condition
        in program order (the HCFG's ``conditions``), shown instead of the host's test when given."""
        program = host if isinstance(host, HostProgram) else HostProgram.of_model(type(host_model), host)
        self._code = getattr(type(host_model), program.function).__code__
        if self._code.co_firstlineno != program.first_line:
            raise ValueError(f"the host program does not match its {program.function} (was host.py edited?)")
        self._decisions = program.decisions
        if self._decisions is not None:
            self.sites: list[ConditionSite] = [ConditionSite(number, 0, test, where, f"if {test}")
                                               for number, (where, test) in enumerate(self._decisions.conditions)]
            code = code if code is not None else self._decisions.code
            self.sub_dnns = self._decisions.sub_dnns
        else:
            self.sites = [ConditionSite(site.number, site.line, site.test, site.where, f"if {site.test}")
                          for site in program.conditions]
            self.sub_dnns = sorted(set(program.calls.values()))
        if code is not None and len(code) == len(self.sites):
            self.sites = [replace(site, code=text or site.code) for site, text in zip(self.sites, code)]
        self._site_at = {site.line: site for site in self.sites if site.line}
        self._body_of = {site.line: site.body_line for site in program.conditions}
        self._call_at = program.calls

    def tally(self) -> Tally:
        return Tally(self.sites, self.sub_dnns)

    def record(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, Trace]:
        """Call ``fn(*args, **kwargs)`` (which runs the host) and return its result and ``Trace``."""
        if self._decisions is not None:
            return self._record_decisions(fn, *args, **kwargs)
        code, site_at, body_of, call_at = self._code, self._site_at, self._body_of, self._call_at
        outcomes: list[tuple[int, bool]] = []
        ran: set[int] = set()

        def tracer() -> Callable[..., Any]:
            pending: list[int] = []  # this frame's condition line whose outcome its next line tells

            def in_method(frame, event, arg):
                if event == "line":
                    line = frame.f_lineno
                    if pending:
                        outcomes.append((site_at[pending[0]].number, line == body_of[pending[0]]))
                        pending.clear()
                    if line in site_at:
                        pending.append(line)
                    elif line in call_at:
                        ran.add(call_at[line])
                return in_method

            return in_method

        result = _traced(code, tracer, fn, args, kwargs)
        return result, Trace(tuple(outcomes), frozenset(ran))

    def _record_decisions(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, Trace]:
        """``record`` for a host with ``decisions``: the outcomes its method holds when it returns."""
        code, variable = self._code, self._decisions.variable
        found: list[Any] = []

        def in_method(frame, event, arg):
            if event == "return" and variable in frame.f_locals:
                found.append(frame.f_locals[variable])
            return in_method

        result = _traced(code, lambda: in_method, fn, args, kwargs)
        if len(found) != 1:
            raise ValueError(f"the host's method returned {len(found)} times with its outcomes, not once")
        outcomes, ran = self._decisions.replay([int(value) for value in _flat(found[0])])
        return result, Trace(outcomes, ran)


def _flat(value: Any) -> list[Any]:
    """The items of a one-dimensional array (numpy's, or anything with ``tolist``)."""
    return list(value.tolist()) if hasattr(value, "tolist") else list(value)


def compiled_coverage(compiled: Any, inputs: Iterable[tuple[Any, ...]]) -> Tally:
    """The coverage of ``compiled`` (a ``dycl.CompiledModel``) over ``inputs`` (argument tuples)."""
    recorder = HostCoverage(compiled._host, host_program(compiled), user_code(compiled))
    tally = recorder.tally()
    for args in inputs:
        tally.add(recorder.record(compiled, *args)[1])
    return tally


def host_program(compiled: Any) -> HostProgram | str:
    """The ``HostProgram`` of an in-process ``CompiledModel``; for a loaded artifact its
    source (``HostCoverage`` then reads the program from the host's own tables)."""
    result = compiled._result
    return result.program if result is not None and result.program is not None else compiled.host_source


def user_code(compiled: Any) -> list[str] | None:
    """The user's source line of each condition of an in-process ``CompiledModel``
    (None for a loaded artifact, which keeps only ``file:line``)."""
    result = getattr(compiled, "_result", None)
    if result is None:
        return None
    if result.program is not None and result.program.decisions is not None:
        return list(result.program.decisions.code) or None
    lines = []
    for cond in result.graph.conditions:
        location = result.rewritten.locations.resolve(cond.statement)
        lines.append(location.source_line().strip() if location else "")
    return lines



def _traced(code: Any, tracer: Callable[[], Callable[..., Any]], fn: Callable[..., Any], args: tuple,
            kwargs: dict[str, Any]) -> Any:
    """``fn(*args, **kwargs)`` with ``tracer()`` tracing each frame of ``code`` (the previous trace
    function put back after)."""

    def dispatch(frame, event, arg):
        return tracer() if frame.f_code is code else None

    previous = sys.gettrace()
    sys.settrace(dispatch)
    try:
        return fn(*args, **kwargs)
    finally:
        sys.settrace(previous)


__all__ = ["ConditionSite", "HostCoverage", "Tally", "Trace", "compiled_coverage", "host_program", "user_code"]
