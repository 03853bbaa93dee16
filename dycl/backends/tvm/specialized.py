"""A sub-DNN with symbolic dims, built twice: once for its example's exact shapes,
where every kernel gets the full schedules (and tuning), and once for any shape.
The artifact file holds both; the host runs the first whenever the inputs have
the example's shapes (``tvm/runtime.py``, the host's copy, reads the format).

Format: ``MAGIC``, one line of JSON ``{"static_bytes": n, "shapes": [[position,
[dims]], ...]}`` (the input positions and shapes the static library was built
for), then the static library's ``n`` bytes, then the generic library's bytes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

MAGIC = b"DYCL-TVM-SPECIALIZED\n"


def example_shapes(example: Sequence[Any]) -> list[list]:
    """[position, shape] of each input tensor of one example (scalars: shape [])."""
    return [[position, list(value.shape)] for position, value in enumerate(example)]


def pack(static: bytes, generic: bytes, shapes: list[list]) -> bytes:
    header = json.dumps({"static_bytes": len(static), "shapes": shapes}, separators=(",", ":")).encode()
    return MAGIC + header + b"\n" + static + generic


__all__ = ["MAGIC", "example_shapes", "pack"]
