"""The per-sample router's own cost, without ONNX Runtime's noise (issue 29).

    python benchmarks/batch_router.py --models skipnet_ff,blockdrop [--size 32] [--rounds 30]

A batched call's time is the sub-DNN runs plus the router (``hostgen/host_router.py``: the
per-sample generators, gathers, rows and joins; ``batch.py``'s *runtime / router* split). On a
shared machine the runs' time moves by 2x between calls and hides any change to the router.
Here each model's batched host (``per_sample=True``) is called once with its sub-DNNs recorded,
then ``--rounds`` times with every sub-DNN call answered from that recording in order, so
that what is timed is the router alone (and one list lookup a run), in each mode of the router
(*per sample*: ``_route_samples``; *groups*: ``_route_groups``, where the host is ``GROUPED``),
alternating. A replayed call must return what the recorded call returned, bit for bit, and
the two modes what each other returned (to ``ATOL``: their runs group the samples otherwise), else
the script raises.

Reported per model: sub-DNN runs per call, and the median and minimum ms of the router per call
in each mode (the minimum is the steadier figure on a loaded machine).
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dycl  # noqa: E402
from dycl.per_sample.testing import batch_of  # noqa: E402

#: the largest difference between the modes' answers (``batch.py``'s tolerance)
ATOL = 1e-4
#: ``GROUP_WHEN`` in each mode: per sample never groups, groups always do (where the host may)
MODES = {"per sample": -1.0, "groups": float("inf")}


class _Recording:
    """The sub-DNN calls of one batched call, in order: recorded, then answered again."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.next = 0

    def recorder(self, callee):
        def record(*args):
            outputs = callee(*args)
            self.calls.append(outputs)
            return outputs
        return record

    def player(self, *args):
        """The next recorded outputs (a call that asks otherwise than recorded ends with other
        outputs or another count of runs, which ``router_ms`` refuses)."""
        outputs = self.calls[self.next]
        self.next += 1
        return outputs


def _with_callees(host, wrap) -> tuple[dict, dict]:
    """Wrap every sub-DNN callable of ``host`` with ``wrap``; returns the originals."""
    saved = (dict(host._call), {index: dict(variants) for index, variants in host._variants.items()})
    host._call = {index: wrap(callee) for index, callee in saved[0].items()}
    host._variants = {index: {key: wrap(callee) for key, callee in variants.items()}
                      for index, variants in saved[1].items()}
    return saved


def _flat(value) -> list[np.ndarray]:
    if isinstance(value, (tuple, list)):
        return [array for item in value for array in _flat(item)]
    if isinstance(value, dict):
        return [array for item in value.values() for array in _flat(item)]
    return [np.asarray(value)]


def _same(a, b, atol: float = 0.0) -> bool:
    """Whether ``a`` and ``b`` hold the same arrays (floats to ``atol``, where given)."""
    first, second = _flat(a), _flat(b)
    return len(first) == len(second) and all(_close(x, y, atol) for x, y in zip(first, second))


def _close(x: np.ndarray, y: np.ndarray, atol: float) -> bool:
    if x.shape != y.shape or x.dtype != y.dtype:
        return False
    if np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"):
        return True
    return bool(atol) and x.dtype.kind == "f" and np.allclose(x, y, rtol=0.0, atol=atol, equal_nan=True)


def router_ms(host, batch: list, rounds: int) -> dict:
    """``{mode: (median ms, min ms)}`` of the router alone on ``batch``, and ``runs`` (sub-DNN runs
    per call); ``host`` is a batched host (``compiled._host``), given back as it was."""
    host_globals = type(host).route.__globals__
    modes = {mode: when for mode, when in MODES.items() if mode == "per sample" or host_globals.get("GROUPED")}
    saved_when, saved_paths, recordings, answers = host_globals["GROUP_WHEN"], vars(host).get("_paths_a_sample"), {}, {}
    try:
        for mode, when in modes.items():  # record each mode's own runs (groups may batch differently)
            host_globals["GROUP_WHEN"], host._paths_a_sample = when, 0.0
            recordings[mode] = recording = _Recording()
            saved = _with_callees(host, recording.recorder)
            try:
                answers[mode] = host(*batch)
            finally:
                host._call, host._variants = saved
        times: dict[str, list[float]] = {mode: [] for mode in modes}
        for round_ in range(rounds):
            for mode in (list(modes) if round_ % 2 else list(reversed(modes))):
                host_globals["GROUP_WHEN"], host._paths_a_sample = modes[mode], 0.0
                recording = recordings[mode]
                recording.next = 0
                saved = _with_callees(host, lambda callee, recording=recording: recording.player)
                try:
                    start = time.perf_counter()
                    got = host(*batch)
                    times[mode].append((time.perf_counter() - start) * 1000.0)
                finally:
                    host._call, host._variants = saved
                if recording.next != len(recording.calls) or not _same(got, answers[mode]):
                    raise RuntimeError(f"{mode}: the replayed call did not repeat the recorded one")
    finally:
        host_globals["GROUP_WHEN"] = saved_when
        if saved_paths is None:
            vars(host).pop("_paths_a_sample", None)
        else:
            host._paths_a_sample = saved_paths
    if not all(_same(answers[mode], answers["per sample"], ATOL) for mode in modes):
        raise RuntimeError("the router's modes disagree on the batch")
    result: dict = {mode: (statistics.median(ms), min(ms)) for mode, ms in times.items()}
    result["runs"] = len(recordings["per sample"].calls)
    return result


def bench(name: str, size: int, rounds: int) -> dict:
    zoo = importlib.import_module(f"models.{name}")
    model, example = zoo.build()
    host = dycl.compile(model, example, per_sample=True, progress=False)._host
    batch = [array.numpy() for array in batch_of([zoo.sample(20_000 + i) for i in range(size)])]
    return {"name": name, **router_ms(host, batch, rounds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", required=True, help="comma-separated zoo names")
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    print(f"router ms per batched call of {args.size} samples, sub-DNN runs replayed; median (min) of {args.rounds}")
    print("| model | runs | per sample | groups |")
    print("|---|---|---|---|")
    for name in args.models.split(","):
        row = bench(name, args.size, args.rounds)
        cells = [f"{row[mode][0]:.2f} ({row[mode][1]:.2f})" if mode in row else "-" for mode in MODES]
        print(f"| {name} | {row['runs']} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
