"""What the build walk saw each tensor statement compute, for the explore walk to reuse.

Both walks run the same statements on the same example objects (the example's
tensors, the model's weights): ``hcfg.build`` places each statement while running
it over every path, and ``hcfg.trace`` runs the optimised graph over every path
again. A tensor statement is a function of the values it reads (the HCFG assumes
this already: liveness drops dead tensor statements), so where the explore walk
meets a statement with *the very same objects, unmodified*, the build's results
are its results; only the statement's symbolic run is still needed.

Assumes: tensor statements have no effect other than binding their targets.
Guarantees (by refusing to record or to replay otherwise): a replayed statement
read the same tensor objects (by identity) at the same ``_version`` (no in-place
change since — a view shares its base's counter), equal Python scalars, and
tuples/lists of those; its results are tensors, tuples of tensors or scalars whose
tensors have not been changed in place since; it made no data-dependent Python
decision (``hcfg.decisions``) — such a statement is always run again, so that the
explore walk raises the error it always raised.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import libcst as cst
import torch
from dycl.hcfg.liveness import EffectsMemo, statement_reads_writes

_SCALARS = (int, float, bool, str, type(None), torch.dtype)
_MISSING = object()


def _snapshot(value: Any) -> Any:
    """A comparable picture of ``value`` (identity and version of each tensor), or
    ``_MISSING`` for a value whose changes cannot be detected."""
    if isinstance(value, torch.Tensor):
        return (value, value._version)
    if isinstance(value, _SCALARS):
        return (type(value), value)
    if isinstance(value, (tuple, list)):
        items = tuple(_snapshot(v) for v in value)
        return _MISSING if any(item is _MISSING for item in items) else (type(value), items)
    return _MISSING


def _same(picture: Any, value: Any) -> bool:
    if picture is _MISSING:
        return False
    if isinstance(picture[0], torch.Tensor):
        return value is picture[0] and value._version == picture[1]
    kind, content = picture
    if type(value) is not kind:
        return False
    if kind in (tuple, list):
        return len(value) == len(content) and all(_same(p, v) for p, v in zip(content, value))
    return value == content


def _result(value: Any) -> bool:
    """A result that can be handed out twice: nothing in it can be appended to."""
    if isinstance(value, (torch.Tensor, *_SCALARS)):
        return True
    return isinstance(value, tuple) and all(_result(v) for v in value)


@dataclass
class _Run:
    reads: tuple[tuple[str, Any], ...]  # name -> snapshot before the statement ran
    writes: tuple[tuple[str, Any, Any], ...]  # name -> value, its snapshot right after
    # handed out once: two paths given the same objects would share an in-place update
    replayed: bool = False


class Observations:
    """Runs of single tensor statements, by statement (one list entry per distinct input)."""

    def __init__(self, locals_: frozenset[str] | set[str]) -> None:
        self.locals = locals_
        # what each statement reads and writes, by statement (``hcfg.liveness``): the build walk asks once per
        # path and statement; the memo holds names before they are narrowed to ``locals_``, so a local added
        # later (a hoisted temporary) is seen
        self._effects: EffectsMemo = {}
        self._runs: dict[int, tuple[cst.CSTNode, list[_Run]]] = {}

    def new_walk(self) -> None:
        """Every run may be handed out once more, to a new explore walk of the same example
        (``dycl.compiler.compile_from``): its paths share nothing with the last walk's, whose
        results are dropped; ``replay`` still hands out only values unchanged since the run."""
        for _, runs in self._runs.values():
            for run in runs:
                run.replayed = False

    def reads(self, stmt: cst.SimpleStatementLine, state: dict[str, Any]) -> tuple[tuple[str, Any], ...] | None:
        """The snapshot of what ``stmt`` reads in ``state`` (take it before running it)."""
        if not isinstance(stmt.body[0], cst.Assign | cst.AugAssign):
            return None
        names, _ = statement_reads_writes(stmt, self.locals, self._effects)
        pictures = tuple((name, _snapshot(state.get(name, _MISSING))) for name in sorted(names))
        return None if any(p is _MISSING for _, p in pictures) else pictures

    def record(self, stmt: cst.SimpleStatementLine, reads: tuple[tuple[str, Any], ...] | None,
               state: dict[str, Any], decided: bool) -> None:
        """``stmt`` has just run on ``state``, having read ``reads``; ``decided``: it made a
        data-dependent Python decision (never replayed)."""
        if reads is None or decided:
            return
        _, names = statement_reads_writes(stmt, self.locals, self._effects)
        if not names or any(not _result(state.get(name, _MISSING)) for name in names):
            return
        writes = tuple((name, state[name], _snapshot(state[name])) for name in sorted(names))
        self._runs.setdefault(id(stmt), (stmt, []))[1].append(_Run(reads, writes))

    def replay(self, statements: tuple[cst.SimpleStatementLine, ...], state: dict[str, Any]) -> bool:
        """Bind in ``state`` what ``statements`` would compute there, if every one of them was
        seen on these very values; False (``state`` untouched) otherwise."""
        bound: dict[str, Any] = {}
        runs = []
        for stmt in statements:
            run = self._find(stmt, bound, state)
            if run is None:
                return False
            runs.append(run)
            bound.update((name, value) for name, value, _ in run.writes)
        for run in runs:
            run.replayed = True
        state.update(bound)
        return True

    def _find(self, stmt: cst.SimpleStatementLine, bound: dict[str, Any], state: dict[str, Any]) -> _Run | None:
        entry = self._runs.get(id(stmt))
        if entry is None or entry[0] is not stmt:
            return None
        for run in entry[1]:
            if run.replayed or not all(_same(picture, value) for _, value, picture in run.writes):
                continue
            if all(_same(picture, bound.get(name, state.get(name, _MISSING))) for name, picture in run.reads):
                return run
        return None


__all__ = ["Observations"]
