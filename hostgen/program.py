"""What the emitter hands on: the host's source and, by construction, what each line is.

``HostCodegen.program()`` returns a ``HostProgram``: the source of ``host.py``, the emitted
method's lines (``line_map``: host line -> ``HostLine``, the kind of statement, the sub-DNN it
calls, the user's ``file:line``), its conditions in program order and its returns. Readers
(``dycl.harness.coverage``, the per-sample router, error messages in the host) use these tables, never
the source text. The host carries the same facts as data, ``FORWARD_LINES`` (offsets from the
emitted method's ``def`` line, so they hold wherever the method lands), from which
``HostProgram.of_model`` rebuilds the program of a loaded artifact.

A host lowered to one graph has no lines for the model's conditions: its ``decisions``
(``hostgen.decisions``, the host's ``FORWARD_DECISIONS``) describe them instead, and
``condition_count`` counts either.

Guarantees: every condition of the HCFG is one ``HostCondition`` (the number is its position
in program order, as ``HCFG.conditions`` lists them); every sub-DNN call is one ``"call"`` line.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from dycl.hostgen.decisions import Decisions

#: the kinds of emitted statement a ``HostLine`` can be
KINDS = ("call", "condition", "host", "return")


@dataclass(frozen=True)
class HostLine:
    """One statement of the emitted method: its ``kind`` (one of ``KINDS``), the user's
    ``where`` (``file.py:line``, then the unrolled context in brackets; "" when unknown),
    the sub-DNN a ``"call"`` runs, and ``text``: a condition's test or a return's value."""

    kind: str
    where: str = ""
    sub_dnn: int | None = None
    text: str = ""
    #: the physical lines the statement spans after its first (a long expression)
    extra_lines: int = 0

    def to_json(self) -> list[Any]:
        return [self.kind, self.sub_dnn, self.where, self.text, self.extra_lines]

    @classmethod
    def from_json(cls, value: list[Any]) -> HostLine:
        kind, sub_dnn, where, text, extra = value
        return cls(kind, where, sub_dnn, text, extra)


@dataclass(frozen=True)
class HostCondition:
    """The ``number``-th condition (program order) at host ``line``; ``body_line`` is the
    first line of its true branch, so the line run after ``line`` tells the outcome."""

    number: int
    line: int
    body_line: int
    test: str
    where: str


@dataclass(frozen=True)
class HostReturn:
    """A ``return`` of the emitted method at host ``line``: its ``value`` and the user's ``where``."""

    line: int
    value: str
    where: str


@dataclass(frozen=True)
class HostProgram:
    """The generated host (see the module docstring). ``function`` is the emitted method of
    ``Model`` (``_forward``, or ``_sample`` in a per-sample host), ``first_line`` its
    ``def`` line and ``last_line`` its last; ``line_map`` has the first line of every
    statement that is not bookkeeping."""

    source: str
    line_map: Mapping[int, HostLine]
    function: str
    first_line: int
    #: the emitted method's last line (its last line of code, read back from a loaded host)
    last_line: int = field(default=0, compare=False)
    #: the source in parts of whole top-level statements (``"".join(parts) == source``; empty: one part),
    #: as ``hostgen.template.host_layout`` lays them out: a copied runtime module is the same part in every
    #: host, so an analysis of the text can be kept per part (``hostgen.host_globals``)
    parts: tuple[str, ...] = field(default=(), compare=False, repr=False)
    #: where the host runs the model's control flow inside one graph: the conditions it reports
    #: instead of its own (``hostgen.decisions``); None: its conditions are the model's
    decisions: Decisions | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.parts and "".join(self.parts) != self.source:
            raise ValueError("a HostProgram's parts must make up its source")

    @property
    def segments(self) -> tuple[str, ...]:
        """``parts``, or the whole source as one part."""
        return self.parts or (self.source,)

    @property
    def method_source(self) -> str:
        """The emitted method's lines, dedented: its line ``k`` is the host's line ``first_line + k - 1``."""
        return textwrap.dedent("\n".join(self.source.splitlines()[self.first_line - 1:self.last_line])) + "\n"

    @property
    def conditions(self) -> tuple[HostCondition, ...]:
        sites = sorted((line, entry) for line, entry in self.line_map.items() if entry.kind == "condition")
        return tuple(HostCondition(number, line, line + entry.extra_lines + 1, entry.text, entry.where)
                     for number, (line, entry) in enumerate(sites))

    @property
    def condition_count(self) -> int:
        """How many of the model's conditions the host reports: its own, or its ``decisions``'."""
        return len(self.decisions.conditions) if self.decisions is not None else len(self.conditions)

    @property
    def returns(self) -> tuple[HostReturn, ...]:
        return tuple(HostReturn(line, entry.text, entry.where)
                     for line, entry in sorted(self.line_map.items()) if entry.kind == "return")

    @property
    def calls(self) -> dict[int, int]:
        """Host line -> the sub-DNN it calls."""
        return {line: entry.sub_dnn for line, entry in self.line_map.items()
                if entry.kind == "call" and entry.sub_dnn is not None}

    def table(self) -> dict[int, list[Any]]:
        """``FORWARD_LINES`` as the host holds it: offset from the ``def`` line -> the line's facts."""
        return {line - self.first_line: entry.to_json() for line, entry in sorted(self.line_map.items())}

    @classmethod
    def of_model(cls, model: type, source: str) -> HostProgram:
        """The program of a host whose ``Model`` class is ``model`` and whose source is
        ``source`` (a loaded ``host.py``), from the ``FORWARD_LINES`` table it holds;
        raises ``ValueError`` for a host without one."""
        function = getattr(model, "_emitted", None)
        method = getattr(model, function, None) if isinstance(function, str) else None
        table = getattr(method, "__globals__", {}).get("FORWARD_LINES")
        if not isinstance(table, dict):
            raise ValueError("the host has no FORWARD_LINES table (was it generated by this version of dycl?)")
        first = method.__code__.co_firstlineno
        last = max(line for _, _, line in method.__code__.co_lines() if line is not None)
        line_map = {first + offset: HostLine.from_json(entry) for offset, entry in table.items()}
        decided = method.__globals__.get("FORWARD_DECISIONS")
        decisions = Decisions.from_json(decided) if isinstance(decided, dict) else None
        return cls(source, MappingProxyType(line_map), function, first, last, decisions=decisions)


__all__ = ["KINDS", "HostCondition", "HostLine", "HostProgram", "HostReturn"]
