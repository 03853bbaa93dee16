"""The source of a lambda stored as a value (``self.act = lambda t: t.clamp(min=0)``,
``key=lambda t: t.sum()`` passed to a helper), as the ``def`` it stands for.

``inspect`` gives a lambda's source as the lines of the statement it is written in. The
lambda is the one ``Lambda`` node there whose parameters are the function's (names and
kinds, in order); it becomes ``def <name>(<parameters>): return <body>``, the body on the
lambda's own line, so errors and location comments point there.

Assumes: ``lines`` are the lines ``inspect.getsourcelines`` gives for ``function``.
Guarantees: returns the source of a ``def`` with the lambda's parameters (defaults
included) and body, and the line number its first line stands for; raises
``UnsupportedError`` where the statement does not parse on its own or holds no such
lambda or more than one (two lambdas with the same parameters on one line).
"""

from __future__ import annotations

import textwrap
import types

import libcst as cst
from dycl.rewriter.errors import SourceLocation, UnsupportedError


def _parameter_names(params: cst.Parameters) -> list[str]:
    named = [*params.posonly_params, *params.params]
    star = [params.star_arg] if isinstance(params.star_arg, cst.Param) else []
    kwargs = [params.star_kwarg] if params.star_kwarg is not None else []
    return [p.name.value for p in (*named, *star, *params.kwonly_params, *kwargs)]


def lambda_source(function: types.FunctionType, lines: list[str], where: SourceLocation) -> tuple[str, int]:
    """The ``def`` source for the lambda ``function`` and the line its first line stands for."""
    code = function.__code__
    count = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
    wanted = list(code.co_varnames[:count])
    text = textwrap.dedent("".join(lines))
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError:
        module = None
    found = [] if module is None else [
        node for node in _lambdas(module) if _parameter_names(node.params) == wanted]
    if len(found) != 1:
        raise UnsupportedError("a lambda whose source cannot be isolated", where,
                               "define the function with def (at module level or as a method)")
    node = found[0]
    empty = cst.Module([])
    params = empty.code_for_node(node.params)
    body = empty.code_for_node(node.body.with_changes(lpar=[], rpar=[]) if isinstance(node.body, cst.Lambda)
                               else node.body)
    name = "lambda_" + function.__qualname__.replace(".", "_").replace("<", "").replace(">", "")
    return f"def {name}({params}):\n    return ({body})\n", code.co_firstlineno - 1


def _lambdas(module: cst.Module) -> list[cst.Lambda]:
    class Collect(cst.CSTVisitor):
        def __init__(self) -> None:
            super().__init__()
            self.found: list[cst.Lambda] = []

        def visit_Lambda(self, node: cst.Lambda) -> None:
            self.found.append(node)

    collector = Collect()
    module.visit(collector)
    return collector.found


__all__ = ["lambda_source"]
