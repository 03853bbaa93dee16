"""The benchmark's eager column by blocks: eager measured alone in fresh processes, and whether the
eager timed in the benchmark's own process agrees with it (issue 29).

Why fresh processes, and several: eager torch with its default two intra-op threads on a two-core
machine runs every parallel region as a team of two OpenMP threads that wait for each other at a
barrier; whenever anything else is runnable (another process, a thread of another runtime, the
kernel), a region waits for the scheduler. Its time per block is then bimodal, and which mode a
block of a few rounds lands in changes from process to process (``benchmarks/eager_neighbours.md``
measured fresh processes disagreeing by up to 2x on the same inputs). One fresh process is
therefore no reference either: the column is the median over ``processes`` fresh processes, and
their lowest and highest median are its band. The eager timed in the benchmark's process agrees
when it lies inside that band widened by ``SLACK`` (a difference below that is not resolvable with
a few processes); where it does not, the tables show the fresh eager as *the* eager and say so.

Each fresh process is ``fresh_eager.py``: the same timing code (``dycl.harness.timing.blocks``),
no ONNX Runtime, no TVM, nothing compiled. The benchmark sets nothing process-wide for them: they
inherit its environment (``OMP_*`` included), so both columns run with the same settings.
"""

from __future__ import annotations

import json
import pickle
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: relative slack around the fresh processes' band within which the in-process eager agrees
SLACK = 0.05
#: a fresh band wider than this (highest / lowest process median) says the machine was not quiet:
#: agreeing with it then means little
NOISY_BAND = 1.25


@dataclass(frozen=True)
class FreshEager:
    """Eager alone by blocks in fresh processes: each process's median (ms) and its rounds' medians."""

    processes_ms: tuple[float, ...]
    rounds_ms: tuple[tuple[float, ...], ...]

    @property
    def median_ms(self) -> float:
        return statistics.median(self.processes_ms)

    def band(self) -> tuple[float, float]:
        """The lowest and highest process median."""
        return min(self.processes_ms), max(self.processes_ms)

    def agrees(self, in_process_ms: float) -> bool:
        """Whether an eager timed elsewhere lies within this band, widened by ``SLACK``."""
        low, high = self.band()
        return low * (1 - SLACK) <= in_process_ms <= high * (1 + SLACK)

    def noisy(self) -> bool:
        """Whether the fresh processes disagree among themselves by more than ``NOISY_BAND``."""
        low, high = self.band()
        return high > low * NOISY_BAND

    def to_json(self) -> dict:
        return {"median_ms": self.median_ms, "band_ms": list(self.band()), "processes_ms": list(self.processes_ms),
                "rounds_ms": [list(r) for r in self.rounds_ms], "noisy": self.noisy()}


def fresh_eager(name: str, inputs, processes: int = 3, rounds: int = 3) -> FreshEager:
    """Eager ``models.<name>`` on ``inputs`` (tuples of tensors) by blocks in ``processes`` fresh
    processes, one after the other."""
    medians, rounds_ms = [], []
    with tempfile.TemporaryDirectory() as scratch:
        data = Path(scratch) / "inputs.pkl"
        data.write_bytes(pickle.dumps([tuple(a.numpy() for a in args) for args in inputs]))
        script = ROOT / "benchmarks" / "fresh_eager.py"
        for _ in range(processes):
            out = subprocess.run([sys.executable, str(script), f"models.{name}", str(data), str(ROOT), str(rounds)],
                                 capture_output=True, text=True, check=True)
            result = json.loads(out.stdout.strip().splitlines()[-1])
            medians.append(result["median_ms"])
            rounds_ms.append(tuple(result["rounds_ms"]))
    return FreshEager(tuple(medians), tuple(rounds_ms))


def cell(fresh: dict) -> str:
    """``median (low–high)`` of a row's fresh eager (its ``to_json``)."""
    low, high = fresh["band_ms"]
    return f"{fresh['median_ms']:.2f} ({low:.2f}–{high:.2f})" + (" noisy" if fresh["noisy"] else "")


__all__ = ["NOISY_BAND", "SLACK", "FreshEager", "cell", "fresh_eager"]
