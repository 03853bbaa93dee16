"""A second graph, traced at another size, for a sub-DNN whose shape guards exclude it.

Library code often treats a size of 1 apart (``if batch_size != position_ids.shape[0]:
expand``; transformers' mask code), and torch's own shape rules do too: traced at
the example's batch of 2, the graph's guard is ``batch != 1``, and a call with one
sample — the most common serving call — would be refused; traced at a batch of 1,
the guard is ``batch == 1``. Like torch.compile's 0/1 specialisation, but ahead of
time: where a variant's guards fail at the other side of that line (every dim
they read at 1, or at 2 where the example has 1), the sub-DNN is exported once
more from an example narrowed or repeated to that size, with guards of its own;
one graph per dim the guards read (a batch of 1 with any sequence length, a
sequence of 1 with any batch); the host runs the first graph whose guards hold
(``hostgen.manifest.SubDNNEntry.otherwise``).

Assumes: a sub-DNN's graph depends only on its inputs' shapes, never on their
values (``dycl.backends.onnx_export`` refuses one that reads values), so rows of
the example are as good an example as any. Guarantees: the alternative has the
same ports as the variant; it is only offered where its export succeeds.
"""

from __future__ import annotations

import dataclasses
import itertools
import warnings
from collections.abc import Mapping
from typing import Any

import torch

from dycl.hcfg.ports import Variant
from dycl.hostgen.manifest import ShapeGuard, ShapeGuardError, check_shape_guard
from dycl.rewriter.errors import SpecialisationWarning

#: how the manifest names an alternative entry: ``<variant>`` + this + its index (only ever written, never
#: parsed: a variant's alternatives are a field of its ``dycl.backends.base.CompiledVariant``)
SUFFIX = "_other_size"


def other_size_variants(variant: Variant, guards: tuple[ShapeGuard, ...]) -> list[Variant]:
    """For each non-empty set of the dims its ``guards`` read (single dims first, in
    order), ``variant`` with its example changed along every input axis that carries
    those dims (to 1, or to 2 where the example has 1): a call with a batch of 1 and a
    long sequence, a sequence of 1 with any batch, and one token of one sample (the
    first decoding step) each find a graph. The caller exports one only where no graph
    made so far covers it (``covered``)."""
    dims = list(dict.fromkeys(variant.inputs[position].shape[axis]
                              for guard in guards for position, axis in guard.dims.values()))
    others = []
    for count in range(1, len(dims) + 1):
        for chosen in itertools.combinations(dims, count):
            changed = list(variant.examples[0])
            for dim in chosen:
                changed = _changed_along(variant, dim, changed) or changed
            if any(a is not b for a, b in zip(changed, variant.examples[0])):
                others.append(dataclasses.replace(variant, examples=(tuple(changed),)))
    return others


def covered(example: tuple[Any, ...], guard_sets: list[tuple[ShapeGuard, ...]], name: str) -> bool:
    """Whether some graph's guards (one tuple per graph) all hold at ``example``'s sizes."""
    for guards in guard_sets:
        try:
            for guard in guards:
                check_shape_guard(guard, example, name)
        except ShapeGuardError:
            continue
        return True
    return False


def _changed_along(variant: Variant, dim: object, example: list[Any]) -> list[Any] | None:
    changed = list(example)
    for position, port in enumerate(variant.inputs):
        value = example[position]
        if not isinstance(value, torch.Tensor) or not isinstance(dim, str):
            continue
        for axis, name in enumerate(port.shape):
            if name == dim and value.shape[axis] != 0:
                value = value.narrow(axis, 0, 1) if value.shape[axis] > 1 else torch.cat([value, value], axis)
        changed[position] = value
    return None if all(a is b for a, b in zip(changed, example)) else changed


def changed_sizes(variant: Variant, other: Variant) -> dict[str, int]:
    """The symbolic dims whose size ``other``'s example changes, with that size."""
    sizes: dict[str, int] = {}
    for port, before, after in zip(variant.inputs, variant.examples[0], other.examples[0]):
        if isinstance(before, torch.Tensor) and isinstance(after, torch.Tensor):
            for axis, name in enumerate(port.shape):
                if isinstance(name, str) and before.shape[axis] != after.shape[axis]:
                    sizes[name] = int(after.shape[axis])
    return sizes


def warn_no_alternative(variant: Variant, other: Variant, error: Exception) -> None:
    """Say that calls at ``other``'s sizes will be refused, because its graph failed."""
    sizes = ", ".join(f"{name} = {size}" for name, size in changed_sizes(variant, other).items())
    lines = str(error).strip().splitlines()
    reason = f"{type(error).__name__}: {lines[0] if lines else ''}"[:400]
    warnings.warn(SpecialisationWarning(
        f"dycl: the graph of sub-DNN {variant.name} is valid only for the sizes its shape guards name, and "
        f"exporting it once more for {sizes or 'the other sizes'} failed ({reason}); the compiled model refuses "
        "calls at those sizes with a ShapeGuardError naming the guard. Compile with an example of those sizes, "
        "or mark the dims static (dynamic=False), for a model that takes them."), stacklevel=3)


def alternative_name(variant_name: str, index: int) -> str:
    """The manifest entry of a variant's ``index``-th graph traced at another size."""
    return f"{variant_name}{SUFFIX}{index}"


def module_of(modules: Mapping[str, Any], entry_name: str) -> Any:
    """The sub-DNN module of a manifest entry, from ``modules`` by entry
    (``dycl.artifact.manifest_build.entry_modules``: an alternative runs its variant's module)."""
    return modules[entry_name]


__all__ = ["SUFFIX", "alternative_name", "changed_sizes", "covered", "module_of", "other_size_variants",
           "warn_no_alternative"]
