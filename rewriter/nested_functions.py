"""Inline a nested function or lambda at one call site (``rewriter.higher_order``).

Assumes: the function's own body holds no nested ``def`` (those are inlined first)
and is annotated with location comments.
Guarantees: ``FunctionInliner.inline`` gives statements equivalent to the call at
its site: parameters bound once (a plain name or literal argument is substituted
where neither side is reassigned), the function's locals renamed to fresh names,
free names left as they are (the enclosing function's, read at the call as Python's
late binding reads them; ``nonlocal`` writes write them), and each ``return v`` in
tail position written by the call site's writer. A ``return`` inside a loop or
``with`` raises ``UnsupportedError`` at its line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst
from dycl.rewriter.errors import UnsupportedError
from dycl.rewriter.locations import LocationTable, comment_of, set_location
from dycl.rewriter.substitute import rename, replace_names
from dycl.rewriter.walk import bound_names, descendants

Block = list[cst.BaseStatement]
Writer = Callable[[cst.BaseExpression], cst.BaseSmallStatement | None]


@dataclass(frozen=True)
class NestedFunction:
    """A nested ``def`` (``body`` its statements) or a lambda (``body`` its expression)."""

    name: str
    params: cst.Parameters
    body: Block | cst.BaseExpression
    where: cst.CSTNode

    @property
    def is_lambda(self) -> bool:
        return isinstance(self.body, cst.BaseExpression)


class FunctionInliner:
    """Fresh names, errors at a line, and the inlining of one call (see the module note)."""

    def __init__(self, definition: cst.FunctionDef, locations: LocationTable) -> None:
        self.locations = locations
        self.taken = {n.value for n in descendants(definition) if isinstance(n, cst.Name)}
        self.current: cst.CSTNode = definition

    def fresh(self, base: str) -> str:
        base = base.lstrip("_") or "v"
        suffix = 1
        while f"{base}_{suffix}" in self.taken:
            suffix += 1
        name = f"{base}_{suffix}"
        self.taken.add(name)
        return name

    def error(self, construct: str, where: cst.CSTNode | None, hint: str = "") -> UnsupportedError:
        return UnsupportedError(construct, self.locations.resolve(where if where is not None else self.current), hint)

    def line(self, small: cst.BaseSmallStatement, where: cst.CSTNode) -> cst.SimpleStatementLine:
        return set_location(cst.SimpleStatementLine([small]), comment_of(where))

    def check_parameters(self, params: cst.Parameters, where: cst.CSTNode) -> None:
        if isinstance(params.star_arg, cst.Param) or params.star_kwarg is not None:
            raise self.error("a nested function or lambda with *args/**kwargs", where, "list its parameters")
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.default is not None and not is_literal(param.default):
                raise self.error("a nested function or lambda whose default is not a literal", where,
                                 "pass the value at the call")

    def bind(self, function: NestedFunction, args: list[cst.Arg], stmt: cst.CSTNode) -> dict[str, cst.BaseExpression]:
        """Parameter name -> argument expression, with literal defaults; refuse what Python would."""
        params = function.params
        positional = [*params.posonly_params, *params.params]
        by_name = {p.name.value: p for p in (*positional, *params.kwonly_params)}
        bound: dict[str, cst.BaseExpression] = {}
        for position, arg in enumerate(args):
            if arg.star:
                raise self.error("a call with *args or **kwargs of a nested function or lambda", stmt)
            if arg.keyword is None:
                if position >= len(positional):
                    raise self.error(f"a call of {function.name} with too many arguments", stmt)
                bound[positional[position].name.value] = arg.value
            elif arg.keyword.value in by_name and arg.keyword.value not in bound:
                bound[arg.keyword.value] = arg.value
            else:
                raise self.error(f"a call of {function.name} with an unexpected argument {arg.keyword.value}", stmt)
        for name, param in by_name.items():
            if name not in bound:
                if param.default is None:
                    raise self.error(f"a call of {function.name} without its argument {name}", stmt)
                bound[name] = param.default
        return bound

    def inline(self, function: NestedFunction, call: cst.Call, write: Writer, stmt: cst.CSTNode) -> Block:
        """``function``'s body at ``stmt``: parameters bound, locals renamed, ``return v``
        written by ``write`` (see the module note)."""
        bound = self.bind(function, list(call.args), stmt)
        if function.is_lambda:
            body: Block = [self.line(cst.Return(function.body), stmt)]
        else:
            body = function.body
        nonlocals = {n.name.value for s in body for node in descendants(s) if isinstance(node, cst.Nonlocal)
                     for n in node.names}
        assigned = set().union(*(bound_names(s) for s in body)) - nonlocals if body else set()
        mapping = {name: self.fresh(name) for name in sorted(assigned | bound.keys())}
        body = [rename(s, mapping) for s in body]
        body = [s for s in body if not (isinstance(s, cst.SimpleStatementLine)
                                        and isinstance(s.body[0], cst.Nonlocal))]
        prologue: Block = []
        substitutions: dict[str, cst.BaseExpression] = {}
        for name, value in bound.items():
            fresh = mapping[name]
            plain = isinstance(value, cst.Name) and value.value not in nonlocals or is_literal(value)
            if plain and not _assigns(body, fresh):
                substitutions[fresh] = value
            else:
                prologue.append(self.line(cst.Assign([cst.AssignTarget(cst.Name(fresh))], value), stmt))
        if substitutions:
            body = [replace_names(s, substitutions.get) for s in body]
        if nonlocals and not isinstance(stmt, cst.SimpleStatementLine):
            raise self.error("a nested function that assigns an enclosing variable, called in a test", stmt)
        return prologue + self.returns(body, write, stmt)

    def returns(self, body: Block, write: Writer, stmt: cst.CSTNode) -> Block:
        """``body`` with each ``return v`` in tail position written by ``write``; a body that
        falls off its end writes ``None``."""
        out: Block = []
        for position, current in enumerate(body):
            rest = body[position + 1:]
            if isinstance(current, cst.SimpleStatementLine) and isinstance(current.body[0], cst.Return):
                value = current.body[0].value or cst.Name("None")
                written = write(value)
                return out + ([current.with_changes(body=[written])] if written is not None else [])
            if _has_return(current):
                if not isinstance(current, cst.If):
                    raise self.error("a return inside a loop or with block of a nested function", current,
                                     "collect the result in a variable and return it at the end")
                then = self.returns(list(current.body.body) + rest, write, stmt)
                orelse_body = _else_body(current) + rest
                orelse = self.returns(orelse_body, write, stmt)
                new_if = current.with_changes(body=current.body.with_changes(body=then),
                                              orelse=cst.Else(cst.IndentedBlock(orelse)) if orelse else None)
                return out + [new_if]
            out.append(current)
        written = write(cst.Name("None"))
        return out + ([self.line(written, stmt)] if written is not None else [])


def writer_for(small: cst.BaseSmallStatement) -> Writer:
    """How the value of the call in ``small`` (``T = call``, ``return call``, ``call``) is written."""
    def write(value: cst.BaseExpression) -> cst.BaseSmallStatement | None:
        if isinstance(small, cst.Assign):
            return cst.Assign(small.targets, value)
        if isinstance(small, cst.Return):
            return cst.Return(value)
        if isinstance(value, (cst.Name, cst.BaseNumber, cst.BaseString)):
            return None
        return cst.Expr(value)
    return write


def _has_return(stmt: cst.BaseStatement) -> bool:
    return any(isinstance(n, cst.Return) for n in descendants(stmt, stop=(cst.FunctionDef, cst.Lambda)))


def _else_body(stmt: cst.If) -> Block:
    if stmt.orelse is None:
        return []
    if isinstance(stmt.orelse, cst.If):
        return [stmt.orelse]
    return list(stmt.orelse.body.body)


def _assigns(body: Block, name: str) -> bool:
    return any(name in bound_names(s) for s in body)


def is_literal(node: cst.BaseExpression) -> bool:
    if isinstance(node, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString)):
        return True
    if isinstance(node, cst.Name):
        return node.value in ("None", "True", "False")
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return is_literal(node.expression)
    if isinstance(node, cst.Tuple):
        return all(is_literal(e.value) for e in node.elements)
    return False


__all__ = ["Block", "FunctionInliner", "NestedFunction", "Writer", "is_literal", "writer_for"]
