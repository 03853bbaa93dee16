"""Pass: an ``assert`` becomes the ``if``/``raise`` it means.

``assert test, message`` runs as ``if not test: raise AssertionError(message)``
(Python's own definition, under ``__debug__``). Written as an ``if``, the test
is one more condition of the program: static tests are folded by constant
propagation, a test on a symbolic size or on tensor values becomes a condition
the host decides on every call, and the ``raise`` a host statement that ends the
path (``hcfg.build``). Kept as an ``assert``, the test would be decided once, on
the example, inside a sub-DNN's trace, and dropped.

Assumes: ``RejectUnsupported`` has passed. Guarantees: no ``assert`` remains;
each replacement keeps the assert's location comment (on the ``if`` header and
on the ``raise``); a line of several small statements that holds an assert is
split into one line per statement, in order.
"""

from __future__ import annotations

import libcst as cst
from dycl.rewriter.exits import Block, with_inner_blocks
from dycl.rewriter.locations import comment_of, set_location
from dycl.rewriter.passes import FunctionUnit


class Asserts:
    """Rewrites every ``assert`` into ``if not (test): raise AssertionError(message)``."""

    name = "asserts"
    description = "`assert test, msg` becomes `if not test: raise AssertionError(msg)`"

    def __init__(self, unit: FunctionUnit) -> None:
        self.unit = unit

    def run(self, body: Block) -> Block:
        return self.block(body)

    def block(self, stmts: Block) -> Block:
        out: Block = []
        for stmt in stmts:
            nested = with_inner_blocks(stmt, self.block)
            if nested is not None:
                out.append(nested)
            elif isinstance(stmt, cst.SimpleStatementLine) and any(isinstance(s, cst.Assert) for s in stmt.body):
                out.extend(_split(stmt))
            else:
                out.append(stmt)
        return out


def _split(line: cst.SimpleStatementLine) -> Block:
    """``line`` as one statement per small statement, each assert as its ``if``."""
    comment = comment_of(line)
    out: Block = []
    for small in line.body:
        single = set_location(cst.SimpleStatementLine(body=[small.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)]),
                              comment)
        out.append(_as_if(small, comment) if isinstance(small, cst.Assert) else single)
    return out


def _as_if(node: cst.Assert, comment: cst.Comment | None) -> cst.If:
    args = [] if node.msg is None else [cst.Arg(node.msg)]
    raise_ = cst.Raise(exc=cst.Call(cst.Name("AssertionError"), args))
    body = cst.IndentedBlock(body=[set_location(cst.SimpleStatementLine(body=[raise_]), comment)])
    test = cst.UnaryOperation(cst.Not(), node.test.with_changes(
        lpar=[cst.LeftParen()], rpar=[cst.RightParen()]))
    return set_location(cst.If(test=test, body=body), comment)
