"""The inputs ``dycl.harness.self_check`` compares on: the example, and inputs derived from it that
are likely to take other paths and sizes.

Assumes: the example is ``forward(*args, **kwargs)``'s arguments, with tensors at any depth
of tuples, lists and dicts (``torch.utils._pytree`` leaves).

Guarantees: every input is a fresh structure (the example's tensors are never handed
out); each derived input changes at least one tensor of the example; derivations keep
dtypes, and keep the values of integer and boolean tensors (indices, token ids, masks)
as a set (only reshuffled), so that they stay valid where the example's were. Random
values come from a private generator with a fixed seed: the process's random state is
left alone and the check is reproducible. The derived inputs are:

- the values negated, and scaled by 3 (floating tensors);
- the values reshuffled (every tensor);
- random values with each floating tensor's own mean and standard deviation;
- another size (each axis the compiled model takes at any size one longer, the new
  values random), when the caller names such axes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils import _pytree as pytree

_SEED = 20260226


@dataclass(frozen=True)
class Derived:
    """One input of the check: ``forward(*args, **kwargs)``; ``resized`` when its sizes differ
    from the example's."""

    description: str
    args: tuple
    kwargs: dict[str, Any]
    is_example: bool = False
    resized: bool = False


def derived_inputs(args: tuple, kwargs: dict[str, Any], symbolic: dict[int, tuple[int, ...]]) -> Iterator[Derived]:
    """The example, then its derived inputs (module docstring); ``symbolic`` maps the id of an
    example tensor to its axes that may change size."""
    yield Derived("example", args, kwargs, is_example=True)
    generator = torch.Generator().manual_seed(_SEED)
    derivations: list[tuple[str, Callable[[torch.Tensor], torch.Tensor]]] = [
        ("example negated", _floats(torch.neg)),
        ("example scaled by 3", _floats(lambda t: t * 3)),
        ("example with its values reshuffled", lambda t: _shuffled(t, generator)),
        ("random input with the example's statistics", _floats(lambda t: _random_like(t, generator))),
    ]
    for description, change in derivations:
        derived = _map_tensors((args, kwargs), lambda tensor, change=change: change(tensor))
        if derived is not None:
            yield Derived(description, *derived)
    if symbolic:
        derived = _map_tensors((args, kwargs), lambda tensor: _longer(tensor, symbolic.get(id(tensor), ()), generator))
        if derived is not None:
            yield Derived("example with every symbolic dim one longer", *derived, resized=True)


def _map_tensors(value: Any, change: Callable[[torch.Tensor], torch.Tensor]) -> tuple | None:
    """``value`` with every tensor replaced by ``change(tensor)`` (one object stays one
    object), or None if no tensor changed."""
    memo: dict[int, torch.Tensor] = {}
    changed = False

    def replace(leaf: Any) -> Any:
        nonlocal changed
        if not isinstance(leaf, torch.Tensor):
            return leaf
        if id(leaf) not in memo:
            with torch.no_grad():
                memo[id(leaf)] = change(leaf).detach()
            changed = changed or memo[id(leaf)].shape != leaf.shape or not torch.equal(memo[id(leaf)], leaf)
        return memo[id(leaf)]

    mapped = pytree.tree_map(replace, value)
    return mapped if changed else None


def _floats(change: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
    """``change`` on floating tensors; other tensors are kept as they are."""
    return lambda tensor: change(tensor) if tensor.is_floating_point() else tensor.clone()


def _shuffled(tensor: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    if tensor.numel() < 2:
        return tensor.clone()
    order = torch.randperm(tensor.numel(), generator=generator)
    return tensor.reshape(-1)[order].reshape(tensor.shape).clone()


def _random_like(tensor: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    if tensor.numel() == 0:
        return tensor.clone()
    values = tensor.double()
    mean = float(values.mean().nan_to_num(0.0))
    spread = float(values.std().nan_to_num(0.0)) if tensor.numel() > 1 else 0.0
    noise = torch.randn(tensor.shape, generator=generator, dtype=torch.float64)
    return (mean + (spread or 1.0) * noise).to(tensor.dtype)


def _longer(tensor: torch.Tensor, axes: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """``tensor`` one longer along each of ``axes``: the new slice of a floating tensor is
    random with the first slice's statistics (a copy would make equal rows, whose ties
    torch and a backend may break differently), of another tensor a copy of the first."""
    result = tensor.clone()
    for axis in axes:
        if result.shape[axis] == 0:
            continue
        extra = result.narrow(axis, 0, 1)
        extra = _random_like(extra, generator) if extra.is_floating_point() else extra
        result = torch.cat([result, extra], dim=axis)
    return result


__all__ = ["Derived", "derived_inputs"]
