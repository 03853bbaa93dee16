"""A callee's ``*args``/``**kwargs`` specialised to one call's packs: each element becomes a
parameter of its own, so that what the callee forwards (``fn(*args, **kwargs)``: a
decorator's wrapper, a helper passing options on to a submodule) is a call with plain
arguments, which ``Inline`` can resolve and inline.

``Inline.bind_arguments`` binds a call's extra positional arguments and keywords, when
some are dynamic, to synthetic parameter names (``Forwarded``); ``specialise`` rewrites
the callee's definition for them:

- the ``*``/``**`` parameters are replaced by the synthetic ones (plain parameters);
- the body starts by rebuilding the packs (``args = (args_0, args_1)``,
  ``kwargs = {"scale": kwargs_scale}``), so every other use reads what Python would;
- where the body never rebinds a pack's name nor changes it in place (``kwargs.pop(k)``,
  ``kwargs[k] = v``: then the pack, not the call's keywords, is what is forwarded), each
  call argument ``*args`` becomes the elements and ``**kwargs`` the keywords (the same
  values in the same order: Python unpacks a tuple in order and a dict in insertion order,
  which is the call's order).

Assumes: ``definition`` is the callee's parsed definition; ``forwarded`` names its own
``*``/``**`` parameters.
Guarantees: the specialised function called with the synthetic parameters computes what
the original called with the packs computes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst
from dycl.rewriter.arguments import mutated_names
from dycl.rewriter.locations import comment_of, set_location
from dycl.rewriter.vocabulary import READING_METHODS
from dycl.rewriter.walk import bound_names, descendants, map_children


@dataclass(frozen=True)
class Forwarded:
    """The synthetic parameters standing for one call's packs: ``positional`` for the
    ``*`` parameter's elements, ``keywords`` (keyword -> parameter) for the ``**`` one's."""

    star: str | None = None
    positional: tuple[str, ...] = ()
    double_star: str | None = None
    keywords: dict[str, str] = field(default_factory=dict)


def specialise(definition: cst.FunctionDef, forwarded: Forwarded) -> cst.FunctionDef:
    """``definition`` taking ``forwarded``'s parameters instead of its packs (see the module note)."""
    params = definition.params
    defaulted = any(p.default is not None for p in (*params.posonly_params, *params.params))
    synthetic = [cst.Param(cst.Name(name), default=cst.Name("None") if defaulted else None)  # always bound
                 for name in (*forwarded.positional, *forwarded.keywords.values())]
    new_params = params.with_changes(
        params=[*params.params, *synthetic], star_kwarg=None,
        star_arg=cst.ParamStar() if params.kwonly_params else cst.MaybeSentinel.DEFAULT)
    body = list(definition.body.body)
    rebound = bound_names(definition.body) | mutated_names(definition)
    rebound |= {name for name in (forwarded.star, forwarded.double_star) if name is not None
                and not _only_read(definition.body, name)}
    comment = comment_of(body[0]) if body else None
    prologue = []
    if forwarded.star is not None:
        elements = [cst.Element(cst.Name(n)) for n in forwarded.positional]
        pack = cst.Tuple(elements) if elements else cst.Tuple([], lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        prologue.append(_assign(forwarded.star, pack, comment))
    if forwarded.double_star is not None:
        pack = cst.Dict([cst.DictElement(cst.SimpleString(repr(key)), cst.Name(name))
                         for key, name in forwarded.keywords.items()])
        prologue.append(_assign(forwarded.double_star, pack, comment))
    unpack = {name for name in (forwarded.star, forwarded.double_star) if name is not None and name not in rebound}

    def replace(node: cst.CSTNode) -> cst.CSTNode:
        node = map_children(node, replace)
        if isinstance(node, cst.Call) and any(a.star and isinstance(a.value, cst.Name) and a.value.value in unpack
                                              for a in node.args):
            return node.with_changes(args=[new for arg in node.args for new in _unpacked(arg, forwarded, unpack)])
        return node

    body = [replace(stmt) for stmt in body] if unpack else body
    return definition.with_changes(params=new_params, body=definition.body.with_changes(body=[*prologue, *body]))


def _only_read(body: cst.CSTNode, name: str) -> bool:
    """Whether every use of ``name`` in ``body`` only reads the pack: ``*name``/``**name`` in a
    call, ``k in name``, ``name[k]``, ``name.get(k)`` and the other reading methods,
    ``len(name)``. Any other use (passed to a helper, aliased, closed over) may change it."""
    safe: set[int] = set()
    uses: list[cst.Name] = []
    for node in descendants(body):
        if isinstance(node, cst.Name) and node.value == name:
            uses.append(node)
        elif isinstance(node, cst.Arg) and node.star:
            safe.add(id(node.value))
        elif isinstance(node, cst.ComparisonTarget) and isinstance(node.operator, (cst.In, cst.NotIn)):
            safe.add(id(node.comparator))
        elif isinstance(node, cst.Subscript):
            safe.add(id(node.value))
        elif isinstance(node, cst.Attribute) and node.attr.value in READING_METHODS:
            safe.add(id(node.value))
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "len" and len(
                node.args) == 1:
            safe.add(id(node.args[0].value))
    return all(id(use) in safe for use in uses)


def _unpacked(arg: cst.Arg, forwarded: Forwarded, unpack: set[str]) -> list[cst.Arg]:
    if not (arg.star and isinstance(arg.value, cst.Name) and arg.value.value in unpack):
        return [arg]
    if arg.star == "*":
        return [cst.Arg(cst.Name(name)) for name in forwarded.positional]
    equal = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
    return [cst.Arg(cst.Name(name), keyword=cst.Name(key), equal=equal) for key, name in forwarded.keywords.items()]


def _assign(name: str, value: cst.BaseExpression, comment: cst.Comment | None) -> cst.SimpleStatementLine:
    return set_location(cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(name))], value)]), comment)


__all__ = ["Forwarded", "specialise"]
