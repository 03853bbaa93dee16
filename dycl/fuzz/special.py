"""Special-valued inputs: the values random normal draws never hit, appended to a program's inputs.

:func:`special_inputs` draws, from the program's seed (its own generator, so that the ordinary
inputs of :func:`dycl.fuzz.loader.make_inputs` stay as they were), one input of each kind of
``KINDS``, in order, each of a batch size taken in turn from the program's batch sizes:

- ``nan``: a normal draw with one NaN entry (a row's, so that reductions meet it);
- ``inf``: a normal draw with +inf and -inf entries (in one row, for a sum of inf - inf = NaN);
- ``zeros`` and ``negzero``: all 0.0, all -0.0 (exact ties against the thresholds 0);
- ``ties``: every row one value repeated (``max``/``argmax``/``sort`` ties);
- ``equal-rows``: one random row repeated over the batch (ties across the batch);
- ``huge``: a normal draw times 1e6; ``tiny``: times 1e-30 (under float32's normal range after a product);
- ``other-batch``: a normal draw of a batch size the program's inputs do not have (one more than the
  largest), where the program allows it: not for one whose batch size depends on the path
  (``batch-resize``: a batch cut to 1 or 3 rows no longer adds to a tensor of the input's batch).

Eager's outputs on them may be NaN, infinite or large: the runner compares them with NaN equal to
NaN, a relative tolerance ``SPECIAL_RTOL`` on top of the absolute one, and drops a special input on
which eager itself raises (``int(nan)``), so that the comparison stays one of values.
"""

from __future__ import annotations

import torch

from dycl.fuzz.features import program_features
from dycl.fuzz.program import Program

KINDS = ("nan", "inf", "zeros", "negzero", "ties", "equal-rows", "huge", "tiny", "other-batch")
#: the relative tolerance of a special input's outputs (huge values round at float32's precision)
SPECIAL_RTOL = 1e-3
_SEED_OFFSET = 0x5EC1A1  # the special inputs' generator: the program's seed plus this


def special_input(kind: str, batch: int, width: int, generator: torch.Generator) -> torch.Tensor:
    """One input of ``kind`` (see ``KINDS``) shaped ``(batch, width)``; draws from ``generator``."""
    x = torch.randn(batch, width, generator=generator)
    row = int(torch.randint(batch, (1,), generator=generator))
    col = int(torch.randint(width, (1,), generator=generator))
    if kind == "nan":
        x[row, col] = float("nan")
    elif kind == "inf":
        x[row, col] = float("inf")
        x[row, (col + 1) % width] = float("-inf")
    elif kind in ("zeros", "negzero"):
        x = torch.full((batch, width), -0.0 if kind == "negzero" else 0.0)
    elif kind == "ties":
        x = x[:, :1].expand(batch, width).clone()
    elif kind == "equal-rows":
        x = x[:1].expand(batch, width).clone()
    elif kind == "huge":
        x = x * 1e6
    elif kind == "tiny":
        x = x * 1e-30
    elif kind == "other-batch":
        pass  # the batch size is the caller's
    else:
        raise ValueError(f"unknown special input kind {kind!r}; known: {KINDS}")
    return x


def special_inputs(program: Program, kinds: tuple[str, ...] = KINDS) -> list[torch.Tensor]:
    """One input of each of ``kinds`` for ``program`` (``other-batch`` only where it allows another
    batch size), seeded by its seed, the program's batch sizes in turn."""
    generator = torch.Generator().manual_seed(program.seed + _SEED_OFFSET)
    sizes = program.batch_sizes
    if "batch-resize" in program_features(program):
        kinds = tuple(kind for kind in kinds if kind != "other-batch")
    out = []
    for i, kind in enumerate(kinds):
        batch = max(sizes) + 1 if kind == "other-batch" else sizes[i % len(sizes)]
        out.append(special_input(kind, batch, program.width, generator))
    return out


__all__ = ["KINDS", "SPECIAL_RTOL", "special_input", "special_inputs"]
