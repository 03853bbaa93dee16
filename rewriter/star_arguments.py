"""Spread the ``*pack`` and ``**pack`` arguments of a call into plain ones, where their shape is static.

A decorator's wrapper calls the function it wraps as ``fn(self, x, *args, **kwargs)``; once the
wrapper is inlined, ``args`` is a tuple literal (``*(1,)``, the forwarded elements of
``rewriter.forwarding``) or a static tuple, and ``kwargs`` a static dict or a dict literal. The
call is then the same as one that passes the elements one by one, which ``Inline`` can bind and
inline (a ``*`` argument used to keep the call opaque, and a decision inside it refused). A
local list of dynamic values whose length the flow knows (``feats = [a, b]``: a ``ListLength``)
is spread as ``feats[0], feats[1]``: the elements it holds at the call, read in order; a dict of
dynamic values whose key set the flow knows (``kwargs`` after ``@deprecate_kwarg``'s rename: a
``DictKeys``) as ``k=kwargs['k']`` per key, in insertion order, a key's known static value as itself.

Assumes: ``evaluate`` returns the ``Static`` of an expression whose value is known at compile
time, else ``None``.
Guarantees: ``spread_arguments`` returns positional and keyword arguments in the order Python
binds them (a ``*`` pack's elements where it stands, a ``**`` pack's keys in its order), each a
CST expression or a ``Static`` whose term reads that element of the pack; or ``None`` when some
pack's length or keys are not static (a starred element in a literal, a dynamic tuple, a key that
is not a string, a key passed twice), so that the call is kept as before.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst
from dycl.rewriter.values import DictKeys, Static, literal_term

Argument = cst.BaseExpression | Static
Evaluate = Callable[[cst.BaseExpression], Static | None]
Length = Callable[[cst.BaseExpression], int | None]
Keys = Callable[[cst.BaseExpression], DictKeys | None]


def spread_arguments(args: list[cst.Arg], evaluate: Evaluate, length: Length = lambda node: None,
                     keys: Keys = lambda node: None) -> tuple[list[Argument], dict[str, Argument]] | None:
    """The call's arguments with every pack spread (see the module docstring), or None."""
    positional: list[Argument] = []
    keywords: dict[str, Argument] = {}
    for arg in args:
        if arg.star == "*":
            items = _elements(arg.value, evaluate, length)
            if items is None:
                return None
            positional += items
        elif arg.star == "**":
            pairs = _entries(arg.value, evaluate, keys)
            if pairs is None or any(key in keywords for key, _ in pairs):
                return None
            keywords.update(pairs)
        elif arg.keyword is not None:
            if arg.keyword.value in keywords:  # also given by a pack: Python raises TypeError
                return None
            keywords[arg.keyword.value] = arg.value
        else:
            positional.append(arg.value)
    return positional, keywords


def _elements(value: cst.BaseExpression, evaluate: Evaluate, length: Length) -> list[Argument] | None:
    if isinstance(value, (cst.Tuple, cst.List)):
        if any(isinstance(element, cst.StarredElement) for element in value.elements):
            return None
        return [element.value for element in value.elements]
    static = evaluate(value)
    if static is None and isinstance(value, cst.Name):  # a list of tensors whose length is known
        known = length(value)
        return None if known is None else [_item_term(value, i) for i in range(known)]
    if static is None or not isinstance(static.value, (tuple, list)):
        return None
    return [Static(item, _item_term(static.term, i)) for i, item in enumerate(static.value)]


def _entries(value: cst.BaseExpression, evaluate: Evaluate, keys: Keys) -> list[tuple[str, Argument]] | None:
    if isinstance(value, cst.Dict):
        pairs: list[tuple[str, Argument]] = []
        for element in value.elements:
            if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString):
                return None
            key = element.key.evaluated_value
            if not isinstance(key, str):
                return None
            pairs.append((key, element.value))
        return pairs
    static = evaluate(value)
    known = keys(value) if static is None else None
    if known is not None:  # a dict of dynamic values whose key set the flow knows (``DictKeys``)
        if not all(isinstance(key, str) for key in known.keys):
            return None
        return [(key, known.value_of(key) or _item_term(value, key)) for key in known.keys]
    if static is None or not isinstance(static.value, dict) or not all(isinstance(k, str) for k in static.value):
        return None
    return [(key, Static(item, _item_term(static.term, key))) for key, item in static.value.items()]


def _item_term(term: cst.BaseExpression, key: int | str) -> cst.BaseExpression:
    """How code reads ``pack[key]`` of a pack written as ``term``: the element itself where the
    term is a display (a pack of the receiver and literals: ``(receiver, 3)``), else a subscript."""
    if isinstance(term, (cst.Tuple, cst.List)) and isinstance(key, int) and key < len(term.elements) and not any(
            isinstance(element, cst.StarredElement) for element in term.elements):
        return term.elements[key].value
    if isinstance(term, cst.Dict) and isinstance(key, str):
        values = [element.value for element in term.elements if isinstance(element, cst.DictElement)
                  and isinstance(element.key, cst.SimpleString) and element.key.evaluated_value == key]
        if values and all(isinstance(element, cst.DictElement) for element in term.elements):
            return values[-1]  # a display's last entry for a key wins, as in Python
    return cst.Subscript(term, [cst.SubscriptElement(cst.Index(literal_term(key)))])
