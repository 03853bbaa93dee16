"""The members a called container element may be, for ``rewriter.choices``.

``members(func, flow, env)`` looks at the callee of a call: ``seq[i]`` (a static
ModuleList, Sequential, list or tuple), ``table[k]`` (a static ModuleDict or
dict with literal keys) or ``getattr(module, name)`` (a static module), and
gives the deciding expression (``i``, ``k``, ``name``), every value it may take
with the static term of the member it picks, and what eager raises for any
other. It says nothing (None) where the container is not static or a key has
no literal; the choice then stays as it is (and an export that reads the key is
refused, ``hcfg.decisions``).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any

import libcst as cst
import torch
from dycl.rewriter.flow import Env, StaticFlow
from dycl.rewriter.values import is_literal, literal_term

_SEQUENCES = (torch.nn.ModuleList, torch.nn.Sequential, list, tuple)
_TABLES = (torch.nn.ModuleDict, dict)
#: more members than this (a vocabulary indexed by a token id) stay as they are: no switch
_MAX_MEMBERS = 64


@dataclass(frozen=True)
class Member:
    """``key == value`` (``value - size`` too, for a sequence index) picks ``term``."""

    value: Any
    term: cst.BaseExpression


@dataclass(frozen=True)
class Members:
    """The deciding ``key``, its ``members`` and the exception (``missing``) eager raises for any other key.
    ``size``: the length of a sequence (a negative index counts from its end); None for keys.
    ``unheld``: the members are values the host cannot hold (modules, functions, a user's Enum
    members): bound to a name, they are aliases (``rewriter.choice_domains``)."""

    key: cst.BaseExpression
    members: tuple[Member, ...]
    missing: str
    size: int | None = None
    unheld: bool = False

    def raise_missing(self, key: cst.BaseExpression) -> cst.Raise:
        """``raise IndexError("index out of range")``, ``raise KeyError(key)``, ``raise AttributeError(key)``."""
        argument = cst.SimpleString('"index out of range"') if self.size is not None else key
        return cst.Raise(cst.Call(cst.Name(self.missing), [cst.Arg(argument)]))

    def test(self, key: cst.BaseExpression, member: Member) -> cst.BaseExpression:
        equal = cst.Comparison(key, [cst.ComparisonTarget(cst.Equal(), literal_term(member.value))])
        if self.size is None:
            return equal
        # ``|``, not ``or``: the key may be a 0-d tensor (``self.experts[idx]``), computed in its sub-DNN
        negative = cst.Comparison(key, [cst.ComparisonTarget(cst.Equal(), literal_term(member.value - self.size))])
        return cst.BinaryOperation(_paren(equal), cst.BitOr(), _paren(negative))


def _paren(node: cst.Comparison) -> cst.Comparison:
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def members(func: cst.BaseExpression, flow: StaticFlow, env: Env) -> Members | None:
    """The members ``func`` (a call's callee) may be (see the module docstring)."""
    if isinstance(func, cst.Subscript) and len(func.slice) == 1 and isinstance(func.slice[0].slice, cst.Index):
        container = flow.evaluate(func.value, env)
        key = func.slice[0].slice.value
        if container is None:
            return None
        value = container.value
        if not isinstance(value, (*_SEQUENCES, *_TABLES)) or not 0 < len(value) <= _MAX_MEMBERS:
            return None
        if isinstance(value, _SEQUENCES):
            found = tuple(Member(i, _item(func.value, i)) for i in range(len(value)))
            return Members(key, found, "IndexError", len(value), all(callable(v) for v in value))
        if all(is_literal(k) for k in value):
            found = tuple(Member(k, _item(func.value, k)) for k in value)
            return Members(key, found, "KeyError", None, all(callable(v) for v in value.values()))
        return None
    if (isinstance(func, cst.Call) and isinstance(func.func, cst.Name) and func.func.value == "getattr"
            and len(func.args) == 2 and not any(a.keyword or a.star for a in func.args)):
        receiver = flow.evaluate(func.args[0].value, env)
        if receiver is None or not isinstance(receiver.value, torch.nn.Module):
            return None
        name = func.args[1].value
        found = tuple(Member(n, cst.Call(cst.Name("getattr"), [func.args[0], cst.Arg(cst.SimpleString(repr(n)))]))
                      for n in _attributes(receiver.value, name, lambda node: flow.evaluate(node, env)))
        found = found[:_MAX_MEMBERS + 1]
        if len(found) > _MAX_MEMBERS:
            return None
        return Members(name, found, "AttributeError", None, True) if found else None
    if isinstance(func, cst.Call) and len(func.args) == 1 and not (func.args[0].keyword or func.args[0].star):
        return _enum_members(func, flow, env)
    return None


def _enum_members(call: cst.Call, flow: StaticFlow, env: Env) -> Members | None:
    """``Mode(value)`` for an ``Enum`` class ``Mode``: its members by value."""
    cls = flow.evaluate(call.func, env)
    if cls is None or not (isinstance(cls.value, type) and issubclass(cls.value, enum.Enum)):
        return None
    found = tuple(Member(m.value, cst.Attribute(call.func, cst.Name(m.name))) for m in cls.value)
    if not 0 < len(found) <= _MAX_MEMBERS or not all(is_literal(m.value) for m in found):
        return None
    return Members(call.args[0].value, found, "ValueError", None, True)


def _item(container: cst.BaseExpression, key: Any) -> cst.Subscript:
    return cst.Subscript(container, [cst.SubscriptElement(cst.Index(literal_term(key)))])


def _attributes(module: torch.nn.Module, name: cst.BaseExpression, evaluate) -> list[str]:
    """The submodules and callable instance attributes of ``module`` whose names ``name``
    may give: an f-string's literal parts must match; any name otherwise."""
    pattern = _pattern(name, evaluate)
    candidates = list(module._modules) + [n for n, v in vars(module).items() if not n.startswith("_") and callable(v)]
    return [n for n in dict.fromkeys(candidates) if n.isidentifier() and (pattern is None or pattern.fullmatch(n))]


#: what ``f"{f(...)}"`` can print for a builtin ``f`` whose result type is fixed (no conversion, no format spec)
_PRINTS = {int: r"-?[0-9]+", len: r"[0-9]+", bool: r"(?:True|False)"}


def _pattern(name: cst.BaseExpression, evaluate) -> re.Pattern | None:
    """The names an f-string may give: its literal parts, and for each replacement field the text
    its value may print — digits for ``int(...)``/``len(...)``, ``True``/``False`` for ``bool(...)``
    (``f"head{int(c)}"`` cannot name ``heads``), anything else (a comparison of tensors prints
    ``tensor(True)``; a name's value is not known here)."""
    if not isinstance(name, cst.FormattedString):
        return None
    return re.compile("".join(re.escape(p.value) if isinstance(p, cst.FormattedStringText) else _prints(p, evaluate)
                              for p in name.parts))


def _prints(field: cst.FormattedStringExpression, evaluate) -> str:
    expression = field.expression
    if field.conversion is not None or field.format_spec is not None:
        return ".+?"
    if isinstance(expression, cst.Call):
        function = evaluate(expression.func)
        for builtin, printed in _PRINTS.items():
            if function is not None and function.value is builtin:
                return printed
    return ".+?"
