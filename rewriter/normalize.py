"""Pass: remove what carries no computation — docstrings and grad-mode ``with`` blocks."""

from __future__ import annotations

import libcst as cst
import torch
from dycl.rewriter.deferred_refusals import marker
from dycl.rewriter.errors import UnsupportedError
from dycl.rewriter.exits import Block, with_inner_blocks
from dycl.rewriter.flow import Env
from dycl.rewriter.passes import FunctionUnit

_GRAD_MODES = (torch.no_grad, torch.enable_grad, torch.inference_mode, torch.set_grad_enabled)


class Normalize:
    """Splices the body of ``with torch.no_grad():`` (and ``enable_grad``,
    ``inference_mode``, ``set_grad_enabled``) into the enclosing block and drops
    docstrings.

    Assumes: ``RejectUnsupported`` has passed.
    Guarantees: no ``with`` statement remains (one of any other context manager becomes a
    refusal where it is still reached, ``rewriter.deferred_refusals``). Gradient mode does not
    change inference results; the rewritten function runs under ``torch.no_grad()`` (see ``RewrittenFunction``).
    """

    name = "normalize"
    description = "drop docstrings, splice `with torch.no_grad():` bodies"

    def __init__(self, unit: FunctionUnit) -> None:
        self.ctx = unit.ctx
        self.flow = unit.flow

    def run(self, body: Block) -> Block:
        if body and _is_docstring(body[0]):
            body = body[1:]
        return self.block(body)

    def block(self, stmts: Block) -> Block:
        out: Block = []
        for stmt in stmts:
            if isinstance(stmt, cst.With):
                refused = self._refusal(stmt)
                if refused is not None:  # refused where still reached (rewriter.deferred_refusals)
                    out.append(marker(self.ctx, stmt, refused))
                    continue
                out.extend(self.block(list(stmt.body.body)))
            else:
                nested = with_inner_blocks(stmt, self.block)
                out.append(stmt if nested is None else nested)
        return out

    def _refusal(self, stmt: cst.With) -> UnsupportedError | None:
        for item in stmt.items:
            call = item.item
            manager = self.flow.evaluate(call.func, Env()) if isinstance(call, cst.Call) else None
            if manager is None or manager.value not in _GRAD_MODES or item.asname is not None:
                return self.ctx.error("a with statement other than torch.no_grad()/torch.inference_mode()",
                                      stmt, "move the with block out of forward()")
        return None


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))
