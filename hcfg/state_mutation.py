"""State objects a sub-DNN changes in place, and the host variables that would go stale.

A compiled sub-DNN gets a fresh copy of each state object it reads
(``hcfg.pytree_ports.rebuild``), so what the library does to it in place — a
KV cache's ``update`` rebinding ``layer.keys`` — happens to the copy only. That is
right where the host's variable is bound to the changed object anew by the same
sub-DNN (``past = out.past_key_values``: the output carries the changed copy), or is
dead. Where a live host variable still holds the object the sub-DNN changed, eager
sees the change through it and the host would not::

    out = self.lm(next_token, past_key_values=past, use_cache=True)   # past grows in place

``watch`` records the attributes of every state object reachable from a sub-DNN's
inputs before it runs; ``stale`` names the variables that, after it ran, still reach
one whose attributes were rebound and are neither outputs nor dead. The caller
(``hcfg.trace``) refuses such a model (``UnsupportedError``) rather than give the
stale answer.

Assumed: in-place writes to tensors are caught elsewhere (version counters,
``hcfg.aliasing``); this module sees attribute rebinding only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dycl.hcfg.state_objects import is_state_object
from torch.utils import _pytree as pytree

Watched = dict[int, tuple[Any, dict[str, int]]]  # id -> (the object, its attributes' ids)


def _state_objects(value: Any, seen: dict[int, Any]) -> None:
    for leaf in pytree.tree_leaves(value):
        if is_state_object(leaf) and id(leaf) not in seen:
            seen[id(leaf)] = leaf
            _state_objects(tuple(vars(leaf).values()), seen)


def watch(values: Iterable[Any]) -> Watched:
    """The state objects reachable from ``values``, with the identity of each attribute."""
    found: dict[int, Any] = {}
    _state_objects(tuple(values), found)
    return {key: (obj, {name: id(v) for name, v in vars(obj).items()}) for key, obj in found.items()}


def changed(watched: Watched) -> set[int]:
    """Ids of the watched objects whose attributes were rebound, added or removed."""
    return {key for key, (obj, before) in watched.items()
            if {name: id(v) for name, v in vars(obj).items()} != before}


def stale(watched: Watched, before: Mapping[str, Any], after: Mapping[str, Any], outputs: Iterable[str],
          live: Iterable[str] | None) -> list[str]:
    """Variables bound to the same value before and after the sub-DNN that reach a changed
    state object, other than its ``outputs``, live after it (``live``; None: all)."""
    targets = changed(watched)
    if not targets:
        return []
    skip = set(outputs)
    names = [name for name in (before if live is None else live) if name not in skip and name in before
             and name in after and after[name] is before[name]]
    return [name for name in names if targets & set(watch([after[name]]))]


__all__ = ["Watched", "changed", "stale", "watch"]
