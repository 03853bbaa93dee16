"""Inputs that ``forward`` updates in place, reproduced as ``torch.export`` reproduces
mutated inputs: the final value of each such input is an extra output of the compiled
program, and the call writes it back into the caller's array.

``x.add_(1)``, ``x.mul_(2).clamp_(0, 1)``, ``x[mask] = 0``, ``x += 1``, ``torch.relu_(x)``,
``F.relu(x, inplace=True)`` and ``out=x`` on a tensor argument ``x`` update the caller's
tensor in eager PyTorch. ``find`` names the inputs the rewritten function updates so
(``hcfg.aliasing.updated_in_place`` and item or attribute assignments rooted at the
name); ``returning_written`` makes every ``return value`` return ``(value, (x, ...))``,
so that each such name is live at every return (liveness then keeps the updates and
makes each sub-DNN that updates ``x`` give back its new value), and the host's
``Model.__call__`` splits the pair and copies each final value into the caller's array
(``np.copyto``; ``hostgen/host_runtime.py``). The manifest lists them (``written_inputs``).

Assumes: the rewritten function is loop-free; a name updated in place and another name
for the same tensor (``y = x; y.add_(1)``, a view) is refused when the HCFG is built
(``hcfg.aliasing``). Guarantees: an input updated in place whose name is also given a new
value (``x.mul_(2); x = x + 1``) keeps its name for the caller's tensor: the new values get
fresh names (``dycl.in_process.input_renaming``), and where that cannot be done the rebinding is refused
with ``UnsupportedError`` at its line, as is any input update under ``per_sample=True``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

import libcst as cst
import torch

from dycl.hcfg.aliasing import item_assigned, updated_in_place
from dycl.in_process.input_renaming import keep_input_names
from dycl.rewriter import RewrittenFunction
from dycl.rewriter.errors import UnsupportedError
from dycl.rewriter.walk import descendants


def find(rewritten: RewrittenFunction, inputs: Mapping[str, Any]) -> tuple[str, ...]:
    """The names among ``inputs`` (flat input name -> example value) that some statement of
    ``rewritten`` updates in place, in parameter order. ``UnsupportedError`` where such a name
    is also rebound in a body ``dycl.in_process.input_renaming`` cannot rename, and where an item of a
    structured input (a dict, list or tuple of tensors) is assigned: the caller's container
    would change, not only its tensors."""
    written: set[str] = set()
    for stmt in _statements(rewritten.definition.body.body):
        updated, assigned = set(updated_in_place(stmt)) & inputs.keys(), item_assigned(stmt) & inputs.keys()
        structured = sorted(name for name in assigned if not isinstance(inputs[name], torch.Tensor))
        if structured:
            raise UnsupportedError(
                f"an assignment to an item of the input `{structured[0]}` (a {type(inputs[structured[0]]).__name__})",
                rewritten.locations.resolve(stmt),
                f"eager PyTorch changes the caller's container; build a new one instead "
                f"(`{structured[0]} = {{**{structured[0]}, ...}}` or a new local name)")
        written |= updated | assigned
    if not written:
        return ()  # nothing to rename, nothing rebound can matter
    renamed = keep_input_names(rewritten, sorted(written))  # x.mul_(2); x = x + 1: x_1 = x + 1
    for stmt in _statements(rewritten.definition.body.body) if renamed is None else ():
        rebound = written & _rebound(stmt)
        if rebound:
            name = sorted(rebound)[0]
            raise UnsupportedError(
                f"an input updated in place (`{name}`) whose name is then given a new value",
                rewritten.locations.resolve(stmt),
                f"eager PyTorch updates the caller's tensor, and dycl reproduces that for an input whose name "
                f"keeps referring to it: give the new value another name (`h = ...` instead of `{name} = ...`)")
    return tuple(name for name in rewritten.signature.parameters if name in written)


def returning_written(rewritten: RewrittenFunction, names: tuple[str, ...]) -> RewrittenFunction:
    """``rewritten`` with every ``return value`` returning ``(value, (name, ...))`` (and an
    explicit ``return None`` at the end of the body where it had none)."""
    if not names:
        return rewritten
    rewritten = keep_input_names(rewritten, names) or rewritten  # find() refused what it cannot rename
    body = list(rewritten.definition.body.body)
    if not body or not isinstance(_small(body[-1]), cst.Return):
        body.append(cst.SimpleStatementLine([cst.Return(cst.Name("None"))],
                                            trailing_whitespace=_trailing(body[-1]) if body else
                                            cst.TrailingWhitespace()))
    definition = rewritten.definition.with_changes(body=rewritten.definition.body.with_changes(body=body))
    definition = definition.visit(_PairReturns(names))
    source = cst.Module([definition]).code
    return dataclasses.replace(rewritten, definition=definition, source=source)


def refuse_per_sample(names: tuple[str, ...], rewritten: RewrittenFunction) -> None:
    if names:
        raise UnsupportedError(f"per_sample=True with an input updated in place (`{names[0]}`)",
                               rewritten.locations.resolve(rewritten.definition),
                               "update a copy (`h = x.clone(); h.add_(1)`), or compile without per_sample")


class _PairReturns(cst.CSTTransformer):
    def __init__(self, names: tuple[str, ...]) -> None:
        super().__init__()
        self.names = names
        self.depth = 0

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.depth += 1
        return self.depth == 1  # the returns of a function defined inside forward() are its own

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self.depth -= 1
        return updated

    def leave_Return(self, original: cst.Return, updated: cst.Return) -> cst.Return:
        finals = cst.Tuple([cst.Element(cst.Name(name), comma=cst.Comma()) for name in self.names])
        value = updated.value or cst.Name("None")
        if isinstance(value, cst.Tuple) and not value.lpar:  # `return a, b`: one element of the pair, not two
            value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return updated.with_changes(value=cst.Tuple([cst.Element(value, comma=cst.Comma()), cst.Element(finals)]))


def _statements(body: Iterable[cst.BaseStatement]) -> Iterable[cst.BaseStatement]:
    """Every simple statement line of ``body``, nested blocks included."""
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            yield stmt
        else:
            for block in _blocks(stmt):
                yield from _statements(block)


def _blocks(stmt: cst.BaseStatement) -> Iterable[Iterable[cst.BaseStatement]]:
    body = getattr(stmt, "body", None)
    if isinstance(body, cst.IndentedBlock):
        yield body.body
    orelse = getattr(stmt, "orelse", None)
    if isinstance(orelse, cst.If):
        yield [orelse]
    elif orelse is not None and isinstance(getattr(orelse, "body", None), cst.IndentedBlock):
        yield orelse.body.body


def _rebound(stmt: cst.BaseStatement) -> set[str]:
    """Names ``stmt`` gives a new value (``name = ...``, also in a tuple target)."""
    found = set()
    for node in descendants(stmt):
        if isinstance(node, cst.Assign):
            for target in node.targets:
                inner = target.target
                elements = inner.elements if isinstance(inner, (cst.Tuple, cst.List)) else [cst.Element(inner)]
                for element in elements:
                    found |= _name(element.value)
        elif isinstance(node, (cst.AnnAssign, cst.NamedExpr)):
            found |= _name(node.target)
    return found


def _name(target: cst.BaseExpression) -> set[str]:
    return {target.value} if isinstance(target, cst.Name) else set()


def _small(stmt: cst.BaseStatement) -> cst.BaseSmallStatement | None:
    return stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and stmt.body else None


def _trailing(stmt: cst.BaseStatement) -> cst.TrailingWhitespace:
    if isinstance(stmt, cst.SimpleStatementLine):
        return stmt.trailing_whitespace
    return cst.TrailingWhitespace()


__all__ = ["find", "refuse_per_sample", "returning_written"]
