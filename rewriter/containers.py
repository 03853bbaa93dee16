"""Python containers as objects in the static environment: aliasing, mutation, escape.

Terms:

- A *container* is a list, dict, set or bytearray (``values.CONTAINERS``).
- A fact *tracks* a container when it is a ``ListLength`` (a dynamic list,
  known by its ``token``) or a ``Static`` whose value reaches the container
  (``values.reachable``: through tuples, containers, views, bound methods).
- A container is *fresh* when the static evaluator created it during this
  rewrite (``ctx.fresh``); any other one (``self.cfg``, a global, a default
  argument) outlives the call.

Invariant, kept by ``ContainerEffects`` for every statement the flow passes
over: a tracked container is reachable at run time only through names whose
facts track it. Anything that could create another way to it — storing it in
a container that is not tracked exactly, passing it to code the rewriter
cannot see, ``b = a if t else c`` — *escapes* it: every fact that tracks it is
dropped, so the container is dynamic (kept by the host) from there on, for
every alias.

Guarantees: a mutation of a tracked container (a method, an item or slice
write, ``del``, an in-place operator) changes every fact that tracks it to the
exact new value — computed on a copy, because environments share facts — or,
where that value cannot be proved, drops them (a list of known length becomes
a ``ListLength``). Mutating a container that outlives the call, or changing a
container and reading it in one statement, raises ``UnsupportedError``.

This module decides what each part of a statement does to a container
(``Position``, ``ContainerEffects``); ``aliases`` applies the change to every
fact that tracks it; ``vocabulary`` names the methods that change, keep or
only read their receiver or arguments.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING, Any

import libcst as cst
import torch
from dycl.rewriter.aliases import FAILED, ContainerChange, Group, is_int, tracks
from dycl.rewriter.precedence import binary
from dycl.rewriter.values import CONTAINERS, TOKENED, DictKeys, ListLength, Static, holds_container, reachable
from dycl.rewriter.vocabulary import COPYING_METHODS, MUTATING_METHODS, READING_METHODS, STORING_METHODS
from dycl.rewriter.walk import COMPREHENSIONS, children, descendants

if TYPE_CHECKING:
    from dycl.rewriter.flow import Env, StaticFlow

# Builtins that neither keep nor change their arguments (their result may share elements with them).
_COPYING_BUILTINS = frozenset({len, sum, sorted, list, tuple, set, frozenset, dict, any, all, isinstance,
                               enumerate, zip, reversed, str, repr, print, range, bool, int, float, abs,
                               round, hash, id, type, callable, format})
_TENSOR_METHODS = frozenset(name for name in dir(torch.Tensor) if not name.startswith("_"))
_IN_PLACE = {cst.AddAssign: operator.iadd, cst.MultiplyAssign: operator.imul, cst.BitOrAssign: operator.ior,
             cst.BitAndAssign: operator.iand, cst.SubtractAssign: operator.isub, cst.BitXorAssign: operator.ixor}


class Position(Enum):
    """What the code around an expression does with its value."""

    READ = "read"        # only reads it
    ALIAS = "alias"      # binds it to a plain name (the flow then tracks the alias)
    COPIED = "copied"    # keeps its elements, not the container itself (``list(a)``, ``b.extend(a)``)
    ESCAPE = "escape"    # keeps it, or hands it to code the rewriter cannot see

    def inner(self) -> Position:
        """The position of a part whose value may become this expression's value."""
        return Position.READ if self is Position.READ else Position.ESCAPE


class ContainerEffects:
    """Applies to ``env`` what one statement does to containers (see the module docstring).

    ``visit(node, position)`` walks an expression, applying the mutations its
    calls make and dropping what escapes; ``store``, ``delete`` and
    ``in_place`` apply item writes, ``del x[k]`` and ``a += b``. ``anchor`` is
    the statement line errors point at.
    """

    def __init__(self, flow: StaticFlow, env: Env, statement: cst.CSTNode, anchor: cst.CSTNode | None) -> None:
        self.flow = flow
        self.env = env
        self.statement = statement
        self.anchor = anchor
        self.conditional = 0
        self.results: dict[int, Any] = {}  # what an exactly applied mutating call returned, by call node
        self.change = ContainerChange(flow, env, anchor)

    # -- expressions ------------------------------------------------------------------------------

    def visit(self, node: cst.CSTNode, position: Position) -> None:
        kind = type(node)
        if kind is cst.Name:
            self._name(node, position)
            return
        if position is not Position.READ and kind in _MAYBE_STATIC:
            static = self.flow.evaluate(node, self.env)
            if static is not None:
                if position is not Position.ALIAS:
                    Group.of(static, include_self=position is Position.ESCAPE).drop(self.env)
                return
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, node, position)
        elif kind in COMPREHENSIONS:
            self._comprehension(node, position)
        else:
            for child in children(node):
                self.visit(child, position.inner())

    def _name(self, node: cst.Name, position: Position) -> None:
        if position is Position.COPIED or position is Position.ESCAPE:
            fact = self.env.get(node.value)
            if tracks(fact):
                Group.of(fact, include_self=position is Position.ESCAPE).drop(self.env)

    def _call(self, node: cst.Call, position: Position) -> None:
        func = node.func
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        if method in MUTATING_METHODS and self._mutating_call(node, func.value, method, position):
            return
        arguments = self._argument_position(node, position)
        if method is None:
            self.visit(func, Position.READ)
        elif method in READING_METHODS:
            self.visit(func.value, Position.READ if position is Position.READ else Position.COPIED)
        else:
            self.visit(func.value, Position.ESCAPE if arguments is Position.ESCAPE else Position.READ)
        for arg in node.args:
            self.visit(arg.value, Position.COPIED if arg.star and arguments is Position.ESCAPE else arguments)

    def _argument_position(self, node: cst.Call, position: Position) -> Position:
        """Where a call puts its arguments: only library code is known not to keep them."""
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in READING_METHODS:
            return position.inner()
        static = self.flow.evaluate(func, self.env)
        if static is None:
            if isinstance(func, cst.Attribute) and func.attr.value in _TENSOR_METHODS:
                return Position.READ
            return Position.ESCAPE
        value = static.value
        try:
            if value in _COPYING_BUILTINS:
                return Position.READ if position is Position.READ else Position.COPIED
        except TypeError:  # an unhashable callable
            pass
        module = getattr(value, "__module__", None) or ""
        if module == "math" or (module.startswith("torch") and not isinstance(value, torch.nn.Module)):
            return Position.READ
        if isinstance(value, torch.nn.Module) and module.startswith("torch.nn.modules"):
            return Position.READ
        return Position.ESCAPE

    def _conditional(self, parts: list[tuple[cst.CSTNode, Position]]) -> None:
        self.conditional += 1
        for part, position in parts:
            self.visit(part, position)
        self.conditional -= 1

    def _bool(self, node: cst.BooleanOperation, position: Position) -> None:
        self.visit(node.left, position.inner())
        self._conditional([(node.right, position.inner())])

    def _if_exp(self, node: cst.IfExp, position: Position) -> None:
        self.visit(node.test, Position.READ)
        self._conditional([(node.body, position.inner()), (node.orelse, position.inner())])

    def _subscript(self, node: cst.Subscript, position: Position) -> None:
        self.visit(node.value, Position.READ if position is Position.READ else Position.COPIED)
        for element in node.slice:
            self.visit(element.slice, Position.READ)

    def _attribute(self, node: cst.Attribute, position: Position) -> None:
        self.visit(node.value, position.inner())

    def _operands(self, node: cst.CSTNode, position: Position) -> None:
        for child in children(node):
            self.visit(child, Position.READ if position is Position.READ else Position.COPIED)

    def _reads(self, node: cst.CSTNode, position: Position) -> None:
        for child in children(node):
            self.visit(child, Position.READ)

    def _display(self, node: cst.CSTNode, position: Position) -> None:
        inner = position.inner()
        for element in node.elements:
            if isinstance(element, (cst.StarredElement, cst.StarredDictElement)):
                self.visit(element.value, Position.READ if inner is Position.READ else Position.COPIED)
            elif isinstance(element, cst.DictElement):
                self.visit(element.key, Position.READ)
                self.visit(element.value, inner)
            else:
                self.visit(element.value, inner)

    def _comprehension(self, node: cst.CSTNode, position: Position) -> None:
        """Comprehension bodies run a dynamic number of times: their mutations drop,
        and what they read from a container may be kept by the result."""
        nodes = list(descendants(node))
        mutates = any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
                      and n.func.attr.value in MUTATING_METHODS for n in nodes)
        iterated = Position.COPIED if mutates or position is not Position.READ else Position.READ
        iters = {id(n) for current in nodes if isinstance(current, cst.CompFor) for n in descendants(current.iter)}
        self.conditional += 1
        for current in nodes:
            if id(current) in iters and not isinstance(current, cst.CompFor):
                continue
            if isinstance(current, cst.CompFor):
                self.visit(current.iter, iterated)
            elif isinstance(current, cst.Call) and isinstance(current.func, cst.Attribute) and (
                    current.func.attr.value in MUTATING_METHODS):
                self._mutating_call(current, current.func.value, current.func.attr.value, Position.ESCAPE)
            elif isinstance(current, cst.Name) and position is not Position.READ:
                self._name(current, Position.ESCAPE)
        self.conditional -= 1

    # -- mutations ----------------------------------------------------------------------------------

    def _mutating_call(self, node: cst.Call, receiver: cst.BaseExpression, method: str,
                       position: Position) -> bool:
        """Apply ``receiver.method(...)``; False when the receiver is not a container we know of."""
        self.visit(receiver, Position.READ)
        target = self.change.resolve(receiver)
        if target is None:
            if not self.change.mutate_inside(receiver):
                return False
            for arg in node.args:
                self.visit(arg.value, Position.ESCAPE)
            return True
        self._refuse_reads_in_same_statement(target, node)
        args = [self.flow.evaluate(arg.value, self.env) for arg in node.args]
        exact = (not self.conditional and not isinstance(target, TOKENED)
                 and not any(arg.star for arg in node.args) and all(a is not None for a in args))
        if not exact:
            kept = Position.ESCAPE if method in STORING_METHODS else (
                Position.COPIED if method in COPYING_METHODS else Position.READ)
            for arg in node.args:
                self.visit(arg.value, kept)
        if self.conditional:
            self.change.drop(target)
        elif isinstance(target, ListLength):
            self.change.set_length(target, _length_after(method, target.length, node, self))
        elif isinstance(target, DictKeys):
            self.change.set_keys(target, _dict_after(method, target, args, node, self))
        elif exact:
            positional = [a.value for a, arg in zip(args, node.args) if arg.keyword is None]
            keywords = {arg.keyword.value: a.value for a, arg in zip(args, node.args) if arg.keyword is not None}
            returned = self.change.update(target, lambda new: getattr(new, method)(*positional, **keywords))
            if returned is not FAILED:
                self.results[id(node)] = returned
        else:
            self.change.degrade(target, _length_after(method, len(target), node, self)
                          if isinstance(target, list) else None)
        if position is not Position.READ and not isinstance(target, TOKENED):
            Group(reachable(target, include_self=False)).drop(self.env)  # ``d.pop(k)`` returns an element
        return True

    def store(self, target: cst.Subscript | cst.Attribute, value: Static | None,
              value_node: cst.BaseExpression | None) -> None:
        """``target = value`` (``value_node`` still to be visited, or None)."""
        if isinstance(target, cst.Attribute):
            self.visit(target.value, Position.READ)
            if value_node is not None:
                self.visit(value_node, Position.ESCAPE)
            return
        self.visit(target, Position.READ)
        owner = self.change.resolve(target.value)
        index = self.change.index(target) if owner is not None else None
        exact = owner is not None and not isinstance(owner, TOKENED) and value is not None and index is not None
        if value_node is not None and not exact:
            self.visit(value_node, Position.ESCAPE)
            if isinstance(owner, TOKENED):  # ``d[k] = d.pop(j)``: the value changed the container first
                owner = self.change.resolve(target.value)
                if owner is None:
                    return
        if owner is None:
            self.change.mutate_inside(target.value)
        elif isinstance(owner, ListLength):
            self.change.set_length(owner, owner.length if is_int(index) else None)
        elif isinstance(owner, DictKeys):
            self.change.set_keys(owner, owner.changed(_with_key(owner.keys, index), {index: _plain(value)})
                                 if _is_key(index) else None)
        elif value is not None and index is not None:
            self.change.update(owner, lambda new: new.__setitem__(index, value.value))
        else:
            self.change.degrade(owner, len(owner) if isinstance(owner, list) and is_int(index) else None)

    def delete(self, target: cst.Subscript) -> None:
        """``del target[key]``."""
        self.visit(target, Position.READ)
        owner = self.change.resolve(target.value)
        if owner is None:
            self.change.mutate_inside(target.value)
            return
        index = self.change.index(target)
        if isinstance(owner, ListLength):
            self.change.set_length(owner, owner.length - 1 if is_int(index) and owner.length > 0 else None)
        elif isinstance(owner, DictKeys):
            self.change.set_keys(owner, owner.changed(_without_key(owner.keys, index)) if _is_key(index) else None)
        elif index is not None:
            self.change.update(owner, lambda new: new.__delitem__(index))
        else:
            self.change.degrade(owner, None)

    def in_place(self, node: cst.AugAssign) -> bool:
        """``a op= b`` on a container changes the object, so every alias sees it.
        False when ``a`` is not a tracked container (an ordinary rebinding)."""
        if not isinstance(node.target, cst.Name):
            return False
        fact = self.env.get(node.target.value)
        apply = _IN_PLACE.get(type(node.operator))
        if isinstance(fact, DictKeys):  # ``d |= other``: the same dict, other keys
            self.visit(node.value, Position.COPIED)
            self.change.drop(fact)
            return True
        if apply is None or not (isinstance(fact, ListLength) or (
                isinstance(fact, Static) and isinstance(fact.value, CONTAINERS))):
            return False
        other = self.flow.evaluate(node.value, self.env)
        if isinstance(fact, ListLength):
            self.visit(node.value, Position.COPIED)
            if apply is operator.imul:
                times = other.value if other is not None and type(other.value) is int else None
                self.change.set_length(fact, None if times is None else fact.length * max(times, 0))
            else:
                added = self.flow.static_length(node.value, self.env) if apply is operator.iadd else None
                self.change.set_length(fact, None if added is None else fact.length + added)
            return True
        container = fact.value
        self.change.require_fresh(container)
        if other is not None:
            self.change.update(container, lambda new: apply(new, other.value))
            return True
        self.visit(node.value, Position.COPIED)
        added = self.flow.static_length(node.value, self.env) if apply is operator.iadd else None
        self.change.degrade(container, len(container) + added if isinstance(container, list) and added is not None
                      else None)
        return True

    def item_in_place(self, node: cst.AugAssign) -> None:
        """``a[k] op= b``: the item is read, combined and written back."""
        target = node.target
        item = self.flow.evaluate(target, self.env)
        if item is not None and isinstance(item.value, CONTAINERS):
            self.change.require_fresh(item.value)
            self.change.drop(item.value)
            item = None
        combined = None
        if item is not None:
            operator_node = getattr(cst, type(node.operator).__name__.replace("Assign", ""))()
            combined = self.flow.evaluate(binary(target, operator_node, node.value), self.env)
        if combined is None:
            self.visit(node.value, Position.ESCAPE)
        else:
            self.visit(node.value, Position.READ)
        self.store(target, combined, None)

    # -- applying a change to every alias ----------------------------------------------------------

    def _refuse_reads_in_same_statement(self, target: ListLength | DictKeys | Any, call: cst.Call) -> None:
        """Constant propagation folds a statement against the facts before it, so
        a read after the change, in the same statement, would see the old value."""
        group = Group(tokens=[target.token]) if isinstance(target, TOKENED) else Group(ids=[id(target)])
        names = {name for name, fact in self.env.facts.items() if group.touches(fact)}
        inside = {id(n) for n in descendants(call)}
        skip = _target_nodes(self.statement)
        if any(isinstance(n, cst.Name) and n.value in names and id(n) not in inside and id(n) not in skip
               for n in descendants(self.statement)):
            raise self.flow.ctx.error(
                "a container changed and read in the same statement", self.anchor,
                "change it on a line of its own (`v = xs.pop()`), then use the container")


def _length_after(method: str, length: int, node: cst.Call, effects: ContainerEffects) -> int | None:
    """A list's length after ``list.method(...)`` (None: not known)."""
    if method in ("append", "insert"):
        return length + 1
    if method in ("pop", "remove"):
        return length - 1 if length > 0 else None
    if method == "clear":
        return 0
    if method in ("sort", "reverse"):
        return length
    if method == "extend" and len(node.args) == 1 and not node.args[0].star:
        added = effects.flow.static_length(node.args[0].value, effects.env)
        return None if added is None else length + added
    return None


def _is_key(index: Any) -> bool:
    """A static key whose membership Python decides without model code."""
    return isinstance(index, (str, int, float, bool, bytes, type(None))) or (
        type(index) is tuple and all(_is_key(part) for part in index))


def _with_key(keys: tuple, key: Any) -> tuple:
    return keys if key in keys else (*keys, key)


def _without_key(keys: tuple, key: Any) -> tuple | None:
    """The keys after removing ``key``; None where it is absent (the program raises ``KeyError``)."""
    return tuple(k for k in keys if k != key) if key in keys else None


def _plain(value: Static | None) -> Static | None:
    """A value a ``DictKeys`` may know: static and holding no container."""
    return value if value is not None and not holds_container(value.value) else None


def _dict_after(method: str, target: DictKeys, args: list[Static | None], node: cst.Call,
                effects: ContainerEffects) -> DictKeys | None:
    """A dynamic dict after ``dict.method(...)`` (None: its keys are not known); ``args``
    are the call's arguments where static."""
    if any(arg.star for arg in node.args):
        return None
    keys = target.keys
    positional = [a for a, arg in zip(args, node.args) if arg.keyword is None]
    first = positional[0].value if positional and positional[0] is not None else None
    if method == "pop" and len(node.args) in (1, 2) and not any(a.keyword for a in node.args) and _is_key(first):
        after = _without_key(keys, first)
        return target.changed(keys if after is None and len(node.args) == 2 else after)
    if method == "setdefault" and len(positional) in (1, 2) and _is_key(first):
        if first in keys:
            return target
        default = positional[1] if len(positional) == 2 else Static(None, cst.Name("None"))
        return target.changed(_with_key(keys, first), {first: _plain(default)})
    if method == "clear" and not node.args:
        return target.changed(())
    if method == "popitem" and not node.args:
        return target.changed(keys[:-1] if keys else None)
    if method == "update":
        added = [arg.keyword.value for arg in node.args if arg.keyword is not None]
        if len(positional) == 1:
            other = _static_keys(node.args[0].value, positional[0], effects)
            if other is None:
                return None
            added = [*other, *added]
        elif positional:
            return None
        for key in added:
            keys = _with_key(keys, key)
        return target.changed(keys, dict.fromkeys(added))
    return None


def _static_keys(node: cst.BaseExpression, static: Static | None, effects: ContainerEffects) -> tuple | None:
    """The keys of a dict argument: a static dict, a display with static keys, a tracked dict."""
    if static is not None:
        return tuple(static.value) if isinstance(static.value, dict) else None
    if isinstance(node, cst.Name):
        fact = effects.env.get(node.value)
        return fact.keys if isinstance(fact, DictKeys) else None
    if isinstance(node, cst.Dict):
        return effects.flow.display_keys(node, effects.env)
    return None


def _target_nodes(statement: cst.CSTNode) -> set[int]:
    """Ids of the nodes of ``statement``'s assignment targets (written after the value is computed)."""
    if isinstance(statement, cst.Assign):
        return {id(n) for target in statement.targets for n in descendants(target.target)}
    return set()


def _nothing(effects: ContainerEffects, node: cst.CSTNode, position: Position) -> None:
    return None


# comprehensions too: one the evaluator runs calls no mutating method (a built container, like a display)
_MAYBE_STATIC = frozenset({cst.Subscript, cst.Attribute, cst.Call, cst.List, cst.Tuple, cst.Dict, cst.Set,
                           cst.BinaryOperation, cst.IfExp, cst.BooleanOperation, cst.ListComp, cst.DictComp,
                           cst.SetComp})

_HANDLERS: dict[type, Callable[[ContainerEffects, Any, Position], None]] = {
    cst.Call: ContainerEffects._call,
    cst.BooleanOperation: ContainerEffects._bool,
    cst.IfExp: ContainerEffects._if_exp,
    cst.Subscript: ContainerEffects._subscript,
    cst.Attribute: ContainerEffects._attribute,
    cst.BinaryOperation: ContainerEffects._operands,
    cst.UnaryOperation: ContainerEffects._reads,
    cst.Comparison: ContainerEffects._reads,
    cst.ComparisonTarget: ContainerEffects._reads,
    cst.FormattedString: ContainerEffects._reads,
    cst.FormattedStringExpression: ContainerEffects._reads,
    cst.ConcatenatedString: ContainerEffects._reads,
    cst.List: ContainerEffects._display,
    cst.Tuple: ContainerEffects._display,
    cst.Set: ContainerEffects._display,
    cst.Dict: ContainerEffects._display,
    cst.Integer: _nothing, cst.Float: _nothing, cst.Imaginary: _nothing, cst.SimpleString: _nothing,
    cst.Ellipsis: _nothing,
}
