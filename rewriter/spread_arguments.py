"""A call's ``*xs``/``**d`` arguments written out as plain ones where the static flow knows
their shape, so that ``Inline`` can bind the call to the callee's parameters.

A decorator's wrapper that edits its keywords before forwarding them
(``kwargs[new] = kwargs.pop(old); return func(*args, **kwargs)``, transformers'
``@deprecate_kwarg``) calls ``func`` with a dict the wrapper built: its values are tensors,
but its key set is fixed by the call site and the static edits (``DictKeys``).

=====================================  =========================================
the argument                           becomes
=====================================  =========================================
``**d``, ``d`` a ``DictKeys``          ``k=d['k']`` for each key, in insertion order
``**d``, ``d`` a static dict           ``k=<term of the value>`` for each key
``*xs``, ``xs`` a ``ListLength``       ``xs[0], xs[1], ...``
``*xs``, ``xs`` a static tuple/list    the terms of its elements
=====================================  =========================================

Assumes: ``env`` holds at the call. Guarantees: the written-out call passes the same
values in the same order as Python's unpacking (a dict unpacks in insertion order, which
``DictKeys`` keeps); a key that is not an identifier, or a pack whose shape is not known,
leaves the call as it is (None).
"""

from __future__ import annotations

import libcst as cst
from dycl.rewriter.flow import Env, StaticFlow
from dycl.rewriter.values import DictKeys, ListLength, subscript_term


def spread_arguments(call: cst.Call, flow: StaticFlow, env: Env) -> cst.Call | None:
    """``call`` with every ``*``/``**`` argument written out (module note); None where one
    cannot be, or where the call has none."""
    if not any(arg.star for arg in call.args):
        return None
    args: list[cst.Arg] = []
    for arg in call.args:
        if not arg.star:
            args.append(arg)
            continue
        spread = _keywords(arg.value, flow, env) if arg.star == "**" else _positionals(arg.value, flow, env)
        if spread is None:
            return None
        args.extend(spread)
    return call.with_changes(args=args)


def _keywords(value: cst.BaseExpression, flow: StaticFlow, env: Env) -> list[cst.Arg] | None:
    fact = env.get(value.value) if isinstance(value, cst.Name) else None
    if isinstance(fact, DictKeys):
        items = [(key, subscript_term(value, key)) for key in fact.keys if isinstance(key, str)]
        if len(items) != len(fact.keys):
            return None
    else:
        static = flow.evaluate(value, env)
        if static is None or type(static.value) is not dict or not all(isinstance(k, str) for k in static.value):
            return None
        items = [(key, subscript_term(static.term, key)) for key in static.value]
    if not all(key.isidentifier() for key, _ in items):
        return None
    return [cst.Arg(term, keyword=cst.Name(key), equal=_EQUAL) for key, term in items]


def _positionals(value: cst.BaseExpression, flow: StaticFlow, env: Env) -> list[cst.Arg] | None:
    fact = env.get(value.value) if isinstance(value, cst.Name) else None
    if isinstance(fact, ListLength):
        return [cst.Arg(subscript_term(value, i)) for i in range(fact.length)]
    static = flow.evaluate(value, env)
    if static is None or type(static.value) not in (tuple, list):
        return None
    return [cst.Arg(subscript_term(static.term, i)) for i in range(len(static.value))]


_EQUAL = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))

__all__ = ["spread_arguments"]
