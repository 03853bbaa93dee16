"""Shrink a failing program on its tree: keep any smaller variant that still fails the same way.

Candidate edits, biggest first: drop a helper or the gate, delete a statement,
replace an ``if`` by one of its branches, drop an ``elif`` or ``else``, replace a
loop by one copy of its body (loop variables become their first value), turn a
loop over modules into ``range(1)``, lower a loop's trip count, drop a returned
value, a layer, a linear layer, a library function, the gate's inner helper, a
pattern flag (train mode, a swapped forward, ``**kwargs``, a decorator), a
container attribute, a buffer or an unused attribute. Every edit makes the
program strictly smaller, so the search ends. It is greedy: after an accepted
edit it continues with the edits at the same position of the new program, and it
stops after a pass with no accepted edit.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator

from dycl.fuzz.program import For, If, Line, Program, Stmt, While, count_lines, walk_blocks


def _substitute(body: list[Stmt], name: str, value: str) -> list[Stmt]:
    """``body`` with the whole word ``name`` replaced by ``value`` in every statement's text."""
    pattern = re.compile(rf"\b{re.escape(name)}\b")

    def text(s: str) -> str:
        return pattern.sub(value, s)

    out: list[Stmt] = []
    for stmt in body:
        if isinstance(stmt, Line):
            out.append(Line(text(stmt.text), None if stmt.returns is None else text(stmt.returns)))
        elif isinstance(stmt, If):
            out.append(If([text(t) for t in stmt.tests], [_substitute(b, name, value) for b in stmt.bodies],
                          None if stmt.orelse is None else _substitute(stmt.orelse, name, value)))
        elif isinstance(stmt, For):
            out.append(For(stmt.target, stmt.kind, _substitute(stmt.body, name, value), stmt.trips))
        else:
            out.append(While(stmt.counter, stmt.bound, _substitute(stmt.body, name, value), stmt.increment_first))
    return out


def _first_iteration(loop: For | While) -> list[Stmt]:
    """The body of ``loop`` as it runs on its first iteration, without the loop."""
    if isinstance(loop, While):
        return list(loop.body)
    body = loop.body
    if loop.kind == "range":
        return _substitute(body, loop.target, "0")
    if loop.kind == "gates":
        return _substitute(body, loop.target, "self.gates[0]")
    if loop.kind == "enumerate":
        index, layer = (part.strip() for part in loop.target.split(","))
        return _substitute(_substitute(body, index, "0"), layer, "self.layers[0]")
    return _substitute(body, loop.target, "self.layers[0]")


def _as_range(loop: For) -> For:
    """``loop`` as ``for <target> in range(1)`` (valid when the body does not use the module it iterated)."""
    target = loop.target.split(",")[0].strip()
    return For(target, "range", list(loop.body), 1)


def _block_edits(block: list[Stmt]) -> Iterator[Callable[[], None]]:
    """In-place edits of one statement list (each a closure, applied to a fresh copy)."""
    for i, stmt in enumerate(block):
        yield lambda i=i: block.__delitem__(i)
        if isinstance(stmt, If):
            for k in range(len(stmt.bodies)):
                yield lambda i=i, k=k: block.__setitem__(slice(i, i + 1), block[i].bodies[k])
            if stmt.orelse is not None:
                yield lambda i=i: block.__setitem__(slice(i, i + 1), block[i].orelse)
                yield lambda i=i: setattr(block[i], "orelse", None)
            if len(stmt.tests) > 1:
                for k in range(len(stmt.tests)):
                    yield lambda i=i, k=k: (block[i].tests.pop(k), block[i].bodies.pop(k))
        elif isinstance(stmt, (For, While)):
            yield lambda i=i: block.__setitem__(slice(i, i + 1), _first_iteration(block[i]))
            if isinstance(stmt, For) and stmt.kind != "range":
                yield lambda i=i: block.__setitem__(i, _as_range(block[i]))
            if isinstance(stmt, For) and stmt.kind == "range" and stmt.trips > 1:
                yield lambda i=i: setattr(block[i], "trips", block[i].trips - 1)
            if isinstance(stmt, While) and stmt.bound > 1:
                yield lambda i=i: setattr(block[i], "bound", block[i].bound - 1)


def _program_edits(program: Program) -> Iterator[Callable[[Program], None]]:
    """Edits of ``program`` as functions applied to a deep copy of it (located by position)."""
    for k in range(len(program.helpers)):
        yield lambda p, k=k: p.helpers.pop(k)
    if program.gate_body is not None:
        yield lambda p: (setattr(p, "gate_body", None), setattr(p, "n_gates", 0))
    n_blocks = sum(1 for _ in walk_blocks(program))
    for b in range(n_blocks):
        block = list(walk_blocks(program))[b]
        for e in range(sum(1 for _ in _block_edits(block))):
            yield _nth_block_edit(b, e)
    for k in range(1, len(program.returns)):
        yield lambda p, k=k: p.returns.pop(k)
    if program.layer_kinds:
        yield lambda p: p.layer_kinds.pop()
    if program.n_fc:
        yield lambda p: setattr(p, "n_fc", p.n_fc - 1)
    if program.n_gates > 1:
        yield lambda p: setattr(p, "n_gates", p.n_gates - 1)
    for k in range(len(program.library)):
        yield lambda p, k=k: p.library.pop(k)
    if program.gate_inner is not None:
        yield lambda p: setattr(p, "gate_inner", None)
    for flag in ("train", "swap_forward", "gate_swap", "gate_kwargs"):
        if getattr(program, flag):
            yield lambda p, flag=flag: setattr(p, flag, False)
    for k, helper in enumerate(program.helpers):
        if helper.decorator:
            yield lambda p, k=k: setattr(p.helpers[k], "decorator", None)
        if helper.kwargs:
            yield lambda p, k=k: setattr(p.helpers[k], "kwargs", False)
    for name in program.attributes:
        yield lambda p, name=name: p.attributes.pop(name)
    for name in program.buffers:
        yield lambda p, name=name: p.buffers.pop(name)
    for k in range(len(program.init_lines)):
        yield lambda p, k=k: p.init_lines.pop(k)
    if program.forward_decorator:
        yield lambda p: setattr(p, "forward_decorator", None)
    if program.module_lines:  # once nothing uses them (else the program fails eagerly and is not taken)
        yield lambda p: setattr(p, "module_lines", [])
    if program.methods:
        yield lambda p: setattr(p, "methods", [])
    if program.batch_sizes != (1,):
        yield lambda p: setattr(p, "batch_sizes", (1,))
    if program.flag is not None:
        yield lambda p: setattr(p, "flag", None)
    if program.limit is not None:
        yield lambda p: setattr(p, "limit", None)


def _nth_block_edit(b: int, e: int) -> Callable[[Program], None]:
    def apply(p: Program) -> None:
        block = list(walk_blocks(p))[b]
        edit = next(x for i, x in enumerate(_block_edits(block)) if i == e)
        edit()
    return apply


def candidates(program: Program) -> list[Program]:
    """Every one-edit variant of ``program``, in the order the shrinker tries them."""
    out = []
    for edit in _program_edits(program):
        variant = program.copy()
        edit(variant)
        out.append(variant)
    return out


def shrink(program: Program, still_fails: Callable[[Program], bool], max_checks: int = 2000,
           max_seconds: float = 600.0, log: Callable[[str], None] | None = None) -> Program:
    """The smallest variant of ``program`` found for which ``still_fails`` holds
    (``still_fails(program)`` itself is assumed true)."""
    start = time.perf_counter()
    checks = 0
    current = program
    progress = True
    while progress:
        progress = False
        position = 0
        while True:
            options = candidates(current)
            if position >= len(options):
                break
            candidate = options[position]
            if checks >= max_checks or time.perf_counter() - start > max_seconds:
                return current
            checks += 1
            if count_lines(candidate) <= count_lines(current) and still_fails(candidate):
                current = candidate
                progress = True
                if log:
                    log(f"shrink: {count_lines(current)} lines after {checks} checks")
            else:
                position += 1
    return current
