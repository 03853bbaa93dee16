"""Execution states used to explore every path of a rewritten function.

Exploration runs the rewritten function on the example input but takes *both*
branches of every ``if``; at a join the states of the incoming branches are
kept side by side unless they have the same ``signature`` (same types, list
lengths, tensor shapes and dtypes — values do not count), so the number of
states stays at the number of structurally different ways to reach a point.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

State = dict[str, Any]

# The key under which a state carries its symbolic mirror (``hcfg.symbolic``), if any.
SYMBOLIC = "__dycl_symbolic__"


def signature(value: Any) -> Any:
    """What compilation depends on: types, structure, shapes and dtypes, not values."""
    if isinstance(value, torch.Tensor):
        return ("tensor", value.dtype, tuple(value.shape))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(signature(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, signature(v)) for k, v in value.items()))
    if isinstance(value, (bool, int, float, complex)):
        return type(value).__name__
    if value is None or isinstance(value, str):
        return value
    return ("object", id(value))


def symbolic_signature(value: Any) -> Any:
    """Like ``signature`` for symbolic values: shapes as printed expressions."""
    if isinstance(value, torch.Tensor):
        return ("tensor", value.dtype, tuple(str(size) for size in value.shape))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(symbolic_signature(v) for v in value))
    if isinstance(value, (torch.SymInt, torch.SymBool, torch.SymFloat)):
        return ("sym", str(value))
    return type(value).__name__


def state_signature(state: State, names: frozenset[str]) -> tuple:
    """The signature of ``names`` in ``state``, and of their symbolic mirrors when it has them:
    two states with equal example shapes but different symbolic dims are kept apart."""
    concrete = tuple(sorted((name, signature(state[name])) for name in names if name in state))
    mirror = state.get(SYMBOLIC)
    if mirror is None:
        return concrete
    return concrete + tuple(sorted((name, symbolic_signature(mirror[name])) for name in names if name in mirror))


def fork(state: State) -> State:
    """A copy whose lists can be appended to without touching the original (nor
    the lists of its symbolic mirror)."""
    copied = {name: copy.copy(value) if isinstance(value, (list, dict)) else value for name, value in state.items()}
    if SYMBOLIC in state:
        copied[SYMBOLIC] = fork(state[SYMBOLIC])
    return copied


def merge(states: list[State], names: frozenset[str]) -> list[State]:
    """``states`` without duplicates by signature over ``names`` (first one wins)."""
    seen: set[tuple] = set()
    kept = []
    for state in states:
        key = state_signature(state, names)
        if key not in seen:
            seen.add(key)
            kept.append(state)
    return kept
