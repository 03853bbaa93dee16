"""Pass: ``super().method(args)`` becomes ``Parent.method(self, args)``, the method Python's
``super()`` finds, called explicitly.

Python resolves ``super()`` in a method defined in class ``C`` as the classes after ``C`` in
``type(self).__mro__``; the method is the first such class's own attribute of that name.
Both are static: ``C`` is the method's ``__class__`` cell, ``self`` the receiver the
function is rewritten for (``FunctionUnit.env``). ``super(C, self)`` is resolved the same
way where ``C`` and ``self`` are static. The explicit call is an ordinary call of a
function: ``Inline`` inlines it where the parent's method branches on data, and a library
parent's method (``nn.Linear.forward``) stays a call that the sub-DNN traces.

Assumes: ``RejectUnsupported`` let ``super`` through (it refuses nothing about it).
Guarantees: no ``super`` call remains; each one replaced was ``super().name(...)`` whose
attribute is a plain function in the class the MRO gives; any other use (a bound method
kept as a value, a property, ``super()`` without a static receiver) raises
``UnsupportedError`` at its line.
"""

from __future__ import annotations

import types

import libcst as cst
from dycl.rewriter.exits import Block
from dycl.rewriter.flow import Env
from dycl.rewriter.passes import FunctionUnit
from dycl.rewriter.values import Static
from dycl.rewriter.walk import descendants, map_children

_HINT = "call the parent's method as super().name(...), as a plain method of the parent class"


class ResolveSuper:
    """Replaces ``super().name(args)`` by ``Parent.name(self, args)`` (see the module note)."""

    name = "super"
    description = "super().m(...) becomes Parent.m(self, ...), the method super() finds"

    def __init__(self, unit: FunctionUnit) -> None:
        self.unit = unit
        self.ctx = unit.ctx
        params = unit.definition.params.params or unit.definition.params.posonly_params
        self.self_name = params[0].name.value if params else None
        self.current: cst.CSTNode = unit.definition

    def run(self, body: Block) -> Block:
        if not any(is_super_call(n) for stmt in body for n in descendants(stmt)):
            return body
        return [self.statement(stmt) for stmt in body]

    def statement(self, stmt: cst.BaseStatement) -> cst.BaseStatement:

        def replace(node: cst.CSTNode) -> cst.CSTNode:
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and is_super_call(node.func.value):
                owner, receiver = self.resolve(node.func.value, node.func.attr.value)
                args = [cst.Arg(receiver.term), *(map_children(a, replace) for a in node.args)]
                return node.with_changes(func=node.func.with_changes(value=owner.term), args=args)
            if is_super_call(node):
                raise self.ctx.error("super() used other than to call a method (super().name(...))", self.current,
                                     _HINT)
            if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                self.current = node  # errors point at the innermost statement
            return map_children(node, replace)

        return replace(stmt)

    def resolve(self, call: cst.Call, attribute: str) -> tuple[Static, Static]:
        """The class whose ``attribute`` ``super()`` finds (a term for it), and the receiver."""
        cls, receiver = self._arguments(call)
        mro = type(receiver.value).__mro__ if not isinstance(receiver.value, type) else ()
        if cls not in mro:
            raise self.ctx.error("super() whose class is not a base of the receiver", self.current, _HINT)
        owner = next((c for c in mro[mro.index(cls) + 1:] if attribute in vars(c)), None)
        if owner is None or not isinstance(vars(owner)[attribute], types.FunctionType):
            raise self.ctx.error(f"super().{attribute}, which is not a plain method of a parent class",
                                 self.current, _HINT)
        return self.ctx.globals.introduce(owner.__name__, owner), receiver

    def _arguments(self, call: cst.Call) -> tuple[type, Static]:
        env: Env = self.unit.env
        if not call.args:
            function = self.unit.parsed.function
            names = function.__code__.co_freevars
            cls = function.__closure__[names.index("__class__")].cell_contents if "__class__" in names else None
            receiver = env.get(self.self_name) if self.self_name else None
        elif len(call.args) == 2 and not any(a.star or a.keyword for a in call.args):
            static_cls = self.unit.flow.evaluate(call.args[0].value, env)
            cls = static_cls.value if static_cls is not None else None
            receiver = self.unit.flow.evaluate(call.args[1].value, env)
        else:
            cls, receiver = None, None
        if not isinstance(cls, type) or not isinstance(receiver, Static):
            raise self.ctx.error("super() whose class or receiver is not known at compile time", self.current,
                                 _HINT)
        return cls, receiver


def is_super_call(node: cst.CSTNode) -> bool:
    """Whether ``node`` is a call of ``super``."""
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "super"
