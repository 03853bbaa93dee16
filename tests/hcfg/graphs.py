"""Small HCFGs built by hand (no frontend, no ``dycl.compile``), and a reference
interpreter that runs one on Python values and says which nodes it ran.

``sub(0, "h = x * 2", at=3)`` is sub-DNN 0 whose statements carry the location
comments ``# model.py:3``, ``# model.py:4``, ...; ``graph(("x",), ...)`` takes
every name a node assigns (and the parameters) as a local. Ports are left empty:
``annotate`` fills them, as the builder's graphs get them.
"""

from __future__ import annotations

import math
from typing import Any

import libcst as cst
import torch
from dycl.hcfg.annotate import annotate
from dycl.hcfg.graph import HCFG, Block, Cond, HostOp, Node, Return, SubDNN, walk
from dycl.rewriter.locations import location_comment, set_location
from dycl.rewriter.walk import bound_names

FILE = "model.py"


def stmt(text: str, at: int | None = None) -> cst.SimpleStatementLine:
    line = cst.parse_statement(text + "\n")
    assert isinstance(line, cst.SimpleStatementLine), text
    return set_location(line, location_comment(FILE, at)) if at is not None else line


def sub(index: int, *lines: str, at: int | None = None) -> SubDNN:
    return SubDNN(index, tuple(stmt(text, None if at is None else at + k) for k, text in enumerate(lines)))


def host(text: str, at: int | None = None) -> HostOp:
    return HostOp(stmt(text, at))


def ret(value: str, at: int | None = None) -> Return:
    line = stmt(f"return {value}", at)
    return Return(line, line.body[0].value)


def cond(index: int, test: str, then: Block = (), orelse: Block = (), at: int | None = None) -> Cond:
    statement = cst.parse_statement(f"if {test}:\n    pass\n")
    if at is not None:
        statement = set_location(statement, location_comment(FILE, at))
    return Cond(index, statement, statement.test, tuple(then), tuple(orelse))


def graph(parameters: tuple[str, ...], *body: Node, name: str = "forward") -> HCFG:
    names = set(parameters)
    for node in walk(tuple(body)):
        statements = node.statements if isinstance(node, SubDNN) else (
            (node.statement,) if isinstance(node, HostOp) else ())
        for statement in statements:
            names |= bound_names(statement)
    return HCFG(name, tuple(parameters), tuple(body), frozenset(names))


def diamond() -> HCFG:
    """``a = x + 1; if n > 0: y = a * 3 else: y = x - 1; return y``, annotated, on lines 2-7."""
    return annotate(graph(
        ("x", "n"),
        sub(0, "a = x + 1", at=2),
        cond(0, "n > 0", then=(sub(1, "y = a * 3", at=4),), orelse=(sub(2, "y = x - 1", at=6),), at=3),
        ret("y", at=7)))


GLOBALS = {"torch": torch, "math": math}


def run(hcfg: HCFG, constants: dict[str, Any] | None = None, outputs: dict[int, list] | None = None,
        **arguments: Any) -> tuple[Any, list[str]]:
    """Run ``hcfg`` as the host would (sub-DNN statements executed in place); returns
    the value returned and the path: ``sub<i>``/``cond<i>:T|F``/``return`` in order.
    ``outputs`` collects each sub-DNN's output values, by index."""
    state: dict[str, Any] = {**GLOBALS, "_constants": constants or {}, **arguments}
    path: list[str] = []
    returned = _run_block(hcfg.body, state, path, {} if outputs is None else outputs)
    return (returned[0] if returned else None), path


def _run_block(block: Block, state: dict[str, Any], path: list[str], outputs: dict[int, list]) -> tuple[Any] | None:
    for node in block:
        if isinstance(node, SubDNN):
            path.append(f"sub{node.index}")
            exec(cst.Module(list(node.statements)).code, state)  # noqa: S102 - the test's own statements
            outputs.setdefault(node.index, []).append(tuple(state[name] for name in node.outputs))
        elif isinstance(node, HostOp):
            exec(cst.Module([node.statement]).code, state)  # noqa: S102
        elif isinstance(node, Cond):
            taken = bool(eval(cst.Module([]).code_for_node(node.test), state))  # noqa: S307
            path.append(f"cond{node.index}:{'T' if taken else 'F'}")
            returned = _run_block(node.then if taken else node.orelse, state, path, outputs)
            if returned is not None:
                return returned
        else:
            path.append("return")
            return (eval(cst.Module([]).code_for_node(node.value), state),)  # noqa: S307
    return None
