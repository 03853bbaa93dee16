"""Switches for the compile-time optimisations, so that each one can be measured
by turning it off (``benchmarks/ablation.py``). Everything is on by default; the
generated host is correct with any combination."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Levers:
    """``conditions_in_producers``: the tensor part of an ``if`` test is computed by
    the sub-DNN before it (off: by a sub-DNN of its own, which
    ``merge_into_producers`` folds back where nothing lies between them).
    ``merge_into_producers``: a sub-DNN moves into an earlier one across host
    operations that cannot tell the difference (``hcfg.optimize.merge_into_producers``).
    ``reuse_identical``: identical sub-DNNs (code, weights and ports) are compiled
    once and share a file and a session."""

    conditions_in_producers: bool = True
    merge_into_producers: bool = True
    reuse_identical: bool = True


ALL_ON = Levers()

__all__ = ["ALL_ON", "Levers"]
