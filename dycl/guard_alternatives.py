"""A second graph, traced at another size, for a sub-DNN whose shape guards exclude it.

Library code often treats a size of 1 apart (``if batch_size != position_ids.shape[0]:
expand``; transformers' mask code), and torch's own shape rules do too: traced at
the example's batch of 2, the graph's guard is ``batch != 1``, and a call with one
sample — the most common serving call — would be refused; traced at a batch of 1,
the guard is ``batch == 1``. Like torch.compile's 0/1 specialisation, but ahead of
time: where a variant's guards fail at the other side of that line (every dim
they read at 1, or at 2 where the example has 1), the sub-DNN is exported once
more from an example narrowed or repeated to that size, with guards of its own;
the host runs whichever graph's guards hold (``hostgen.manifest.SubDNNEntry.otherwise``).

Assumes: a sub-DNN's graph depends only on its inputs' shapes, never on their
values (``dycl.backends.onnx_export`` refuses one that reads values), so rows of
the example are as good an example as any. Guarantees: the alternative has the
same ports as the variant; it is only offered where its export succeeds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

from dycl.hcfg.ports import Variant
from dycl.hostgen.manifest import ShapeGuard, ShapeGuardError, check_shape_guard

#: how the host names an alternative entry: ``<variant>`` + this
SUFFIX = "_other_size"


def other_size_variant(variant: Variant, guards: tuple[ShapeGuard, ...]) -> Variant | None:
    """``variant`` with its example changed along every input axis that carries a dim
    its ``guards`` read: to 1, or to 2 where that dim is 1 on the example; None where
    the guards hold at those sizes anyway or nothing changes."""
    example = variant.examples[0]
    dims = {variant.inputs[position].shape[axis] for guard in guards for position, axis in guard.dims.values()}
    changed = list(example)
    for position, port in enumerate(variant.inputs):
        value = example[position]
        if not isinstance(value, torch.Tensor):
            continue
        for axis, dim in enumerate(port.shape):
            if dim in dims and isinstance(dim, str) and value.shape[axis] != 0:
                value = value.narrow(axis, 0, 1) if value.shape[axis] > 1 else torch.cat([value, value], axis)
        changed[position] = value
    if all(a is b for a, b in zip(changed, example)):
        return None
    try:
        for guard in guards:
            check_shape_guard(guard, changed, variant.name)
    except ShapeGuardError:
        return dataclasses.replace(variant, examples=(tuple(changed),))
    return None


def module_of(modules: Mapping[str, Any], entry_name: str) -> Any:
    """The sub-DNN module of a manifest entry: an alternative runs its variant's module."""
    return modules[entry_name] if entry_name in modules else modules[entry_name.removesuffix(SUFFIX)]


__all__ = ["SUFFIX", "module_of", "other_size_variant"]
