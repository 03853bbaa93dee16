"""A sub-DNN graph specialised to its example's sizes, because code it calls makes a
Python number from a symbolic size (``np.array([[start]] * x.size(0))``).

The TorchScript exporter keeps such a number as a constant: the graph is right only
where every symbolic dim of its inputs has the example's size. ``pin_guards`` gives
the host one ``ShapeGuard`` per symbolic input dim (``batch == 2``), so other sizes
are refused by name (``ShapeGuardError``) — and a size of 1 gets a graph of its own
(``dycl.export.alternatives``) — instead of the compile failing.

Assumes: every value read was computed from shapes and constants only
(``hcfg.traced_shapes``: the caller checks ``Decision.shape_only``); with the inputs'
sizes fixed, so is each such value. Guarantees: the guards hold exactly at the
example's sizes; the ``SpecialisationWarning`` names the line that read the size,
the dims pinned, and ``dynamic=False``.
"""

from __future__ import annotations

import warnings

import torch

from dycl.hcfg.decisions import Decision
from dycl.hcfg.ports import Variant
from dycl.hostgen.manifest import ShapeGuard
from dycl.rewriter.errors import SourceLocation, SpecialisationWarning


def pin_guards(variant: Variant, dynamic_axes: dict[str, dict[int, str]], where: str) -> tuple[ShapeGuard, ...]:
    """One guard per symbolic dim of ``variant``'s inputs: its size in the example."""
    guards: dict[str, ShapeGuard] = {}
    example = variant.examples[0]
    for position, port in enumerate(variant.inputs):
        value = example[position]
        if not isinstance(value, torch.Tensor):
            continue
        for axis, dim in dynamic_axes.get(port.name, {}).items():
            name = dim if dim.isidentifier() and dim not in ("min", "max") else f"d{position}_{axis}"
            text = f"({name} == {int(value.shape[axis])})"
            guards.setdefault(text, ShapeGuard(text, {name: (position, axis)}, where))
    return tuple(guards.values())


def warn_specialised(guards: tuple[ShapeGuard, ...], decision: Decision, where: SourceLocation | None,
                     shown: set[tuple[str, str, int]]) -> None:
    """Warn once per line that a size was made a Python number there."""
    key = ("dycl-specialised", str(where), 0)
    if key in shown or not guards:
        return
    shown.add(key)
    sizes = ", ".join(guard.holds.strip("()") for guard in guards)
    warnings.warn(SpecialisationWarning(
        f"{where or 'dycl'}: {decision.what} of a symbolic size, in code exported as one graph, makes a Python "
        f"number of it; dycl compiles that graph for {sizes} only (and for a size of 1 where it can), and the "
        "compiled model refuses other sizes by name. To keep the dim symbolic, compute with tensors "
        "(x.new_full((x.size(0), 1), start) instead of np.array([[start]] * x.size(0))); dynamic=False "
        "(or a dynamic= dict without that dim) says it is static."), stacklevel=2)


__all__ = ["pin_guards", "warn_specialised"]
