"""Facts that track one container, and changing all of them together.

Terms (``containers`` defines the rest): a fact *tracks* a container when it
is a ``ListLength`` or a ``Static`` whose value reaches the container
(``values.reachable``). A ``Group`` is a set of containers and dynamic lists
whose facts change together.

``ContainerChange`` applies one change of a container to an environment: every
fact that tracks it gets the container's exact new value (computed on a copy,
because environments share facts), a ``ListLength``, or is dropped — so no
name keeps a stale view of a container that another name changed.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import libcst as cst
import torch
from dycl.rewriter.values import (
    CONTAINERS,
    TOKENED,
    DictKeys,
    FreshContainers,
    ListLength,
    Static,
    holds_container,
    reachable,
)

if TYPE_CHECKING:
    from dycl.rewriter.flow import Env, StaticFlow


def tracks(fact: Static | ListLength | DictKeys | None) -> bool:
    return isinstance(fact, TOKENED) or (isinstance(fact, Static) and holds_container(fact.value))


class Group:
    """Containers (by id) and dynamic lists and dicts (by token) whose facts change together."""

    def __init__(self, ids: Iterable[int] = (), tokens: Iterable[object] = ()) -> None:
        self.ids = set(ids)
        self.tokens = set(tokens)

    @classmethod
    def of(cls, fact: Static | ListLength | DictKeys | None, include_self: bool = True) -> Group:
        if isinstance(fact, TOKENED):
            return cls(tokens=[fact.token] if include_self else [])
        if isinstance(fact, Static) and holds_container(fact.value):
            return cls(ids=reachable(fact.value, include_self))
        return cls()

    def __bool__(self) -> bool:
        return bool(self.ids or self.tokens)

    def add(self, other: Group) -> None:
        self.ids |= other.ids
        self.tokens |= other.tokens

    def touches(self, fact: Static | ListLength | DictKeys | None) -> bool:
        if isinstance(fact, TOKENED):
            return fact.token in self.tokens
        if self.ids and isinstance(fact, Static) and holds_container(fact.value):
            return not self.ids.isdisjoint(reachable(fact.value))
        return False

    def drop(self, env: Env) -> None:
        """Forget every fact that tracks a container of this group."""
        if self:
            for name in [n for n, fact in env.facts.items() if self.touches(fact)]:
                env.kill(name)


class ContainerChange:
    """Changes to the containers ``env`` tracks, made by one statement of ``flow``'s
    function (``anchor``: the statement line errors point at)."""

    def __init__(self, flow: StaticFlow, env: Env, anchor: cst.CSTNode | None) -> None:
        self.flow = flow
        self.ctx = flow.ctx
        self.env = env
        self.anchor = anchor

    def resolve(self, receiver: cst.BaseExpression) -> ListLength | DictKeys | Any | None:
        """The container ``receiver`` denotes: a ``ListLength``, a ``DictKeys``, a static container, or None."""
        if isinstance(receiver, cst.Name):
            fact = self.env.get(receiver.value)
            if isinstance(fact, TOKENED):
                return fact
        static = self.flow.evaluate(receiver, self.env)
        if static is not None and isinstance(static.value, CONTAINERS):
            self.require_fresh(static.value)
            return static.value
        return None

    def require_fresh(self, container: Any) -> None:
        """Refuse to change a container this rewrite did not create (it outlives the call)."""
        if container not in self.ctx.fresh:
            raise self.ctx.error(
                f"a change to a {type(container).__name__} that outlives the call (it belongs to the model, "
                "a global or a default argument)", self.anchor,
                "copy it first (`d = dict(self.cfg)`, `xs = list(self.xs)`) and change the copy, or return "
                "the new value")

    def mutate_inside(self, receiver: cst.BaseExpression) -> bool:
        """A change to an object we cannot name, inside a known container
        (``d[k].append(x)`` with ``k`` dynamic): drop every container it may be.
        Returns whether such a container exists."""
        base = receiver
        while True:
            if isinstance(base, cst.Call) and isinstance(base.func, cst.Attribute):
                base = base.func.value
            elif isinstance(base, (cst.Subscript, cst.Attribute)):
                base = base.value
            else:
                return False
            static = self.flow.evaluate(base, self.env)
            if static is not None:
                inside = reachable(static.value, include_self=False)
                for container in inside.values():
                    self.require_fresh(container)
                Group(inside).drop(self.env)
                return bool(inside)

    def drop(self, target: ListLength | DictKeys | Any) -> None:
        """Forget every fact that tracks ``target`` (its value is no longer known)."""
        if isinstance(target, TOKENED):
            Group(tokens=[target.token]).drop(self.env)
        else:
            Group(ids=[id(target)]).drop(self.env)

    def update(self, container: Any, change: Callable[[Any], Any]) -> Any:
        """Every fact tracking ``container`` now sees ``change`` applied to a copy
        of it; returns what ``change`` returned (``FAILED`` if it raised)."""
        new = copy.copy(container)
        try:
            returned = change(new)
        except Exception:  # the program raises here at run time: keep it dynamic
            self.drop(container)
            return FAILED
        self.ctx.fresh.add(new)
        replaced = {id(container): new}
        group = Group(ids=[id(container)])
        for name, fact in list(self.env.facts.items()):
            if group.touches(fact):
                value = _replace(fact.value, replaced, self.ctx.fresh)
                if value is FAILED:
                    self.env.kill(name)
                else:
                    self.env.bind(name, Static(value, cst.Name(name)))
        return returned

    def degrade(self, container: Any, length: int | None) -> None:
        """``container`` changed to a value not known statically; a list of known
        ``length`` becomes a ``ListLength``."""
        fact = ListLength(length) if length is not None and length >= 0 and isinstance(container, list) else None
        self._rebind(container, lambda name: fact)

    def _rebind(self, container: Any, fact_for: Callable[[str], Static | ListLength | None]) -> None:
        group = Group(ids=[id(container)])
        for name, fact in list(self.env.facts.items()):
            if isinstance(fact, Static) and fact.value is container:
                new = fact_for(name)
                if new is None:
                    self.env.kill(name)
                else:
                    self.env.bind(name, new)
            elif group.touches(fact):
                self.env.kill(name)

    def set_length(self, target: ListLength, length: int | None) -> None:
        new = ListLength(length, target.token) if length is not None and length >= 0 else None
        for name, fact in list(self.env.facts.items()):
            if isinstance(fact, ListLength) and fact.token is target.token:
                if new is None:
                    self.env.kill(name)
                else:
                    self.env.bind(name, new)

    def set_keys(self, target: DictKeys, new: DictKeys | None) -> None:
        """The dynamic dict ``target`` is now ``new`` (None: its keys are not known) under every alias."""
        for name, fact in list(self.env.facts.items()):
            if isinstance(fact, DictKeys) and fact.token is target.token:
                if new is None:
                    self.env.kill(name)
                else:
                    self.env.bind(name, new)

    def index(self, target: cst.Subscript) -> Any:
        """The static key or slice of ``target``; None when it is not known."""
        if len(target.slice) != 1:
            return None
        element = target.slice[0].slice
        if isinstance(element, cst.Index):
            static = self.flow.evaluate(element.value, self.env)
            return None if static is None or isinstance(static.value, torch.Tensor) else static.value
        parts = []
        for part in (element.lower, element.upper, element.step):
            static = self.flow.evaluate(part, self.env) if part is not None else Static(None, cst.Name("None"))
            if static is None:
                return None
            parts.append(static.value)
        return slice(*parts)


FAILED = object()


def _replace(value: Any, replaced: dict[int, Any], fresh: FreshContainers) -> Any:
    """``value`` with the containers in ``replaced`` (by id) swapped for their
    new versions; only the lists, dicts and tuples on the way to them are
    copied (and shared between facts through ``replaced``); ``FAILED`` when
    the way passes through something that cannot be copied (a view, a set)."""
    key = id(value)
    if key in replaced:
        return replaced[key]
    if not holds_container(value) or replaced.keys().isdisjoint(reachable(value)):
        return value
    new: Any = FAILED
    if type(value) in (list, tuple):
        items = [_replace(item, replaced, fresh) for item in value]
        if all(item is not FAILED for item in items):
            new = type(value)(items)
    elif type(value) is dict:
        entries = {k: _replace(v, replaced, fresh) for k, v in value.items()}
        if all(v is not FAILED for v in entries.values()):
            new = entries
    if new is not FAILED:
        fresh.add(new)
    replaced[key] = new
    return new


def is_int(index: Any) -> bool:
    return type(index) is int
