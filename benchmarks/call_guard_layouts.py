"""What guarding the weights' layouts costs per call: ``CallGuard.check`` without it, with dynamo's
native check (``dycl.in_process.tensor_layouts``, what dycl uses) and with the Python fallback.

Each zoo model is compiled once; the three guards differ only in their layout check. Times the
check alone (the three interleaved within every round, ``--calls`` calls per round, median and
min-max over ``--rounds`` rounds) and the whole in-process call by blocks
(``dycl.harness.timing.blocks``: each guard's model on all inputs back to back, alternating block by
block). Writes ``--out`` (markdown) with the machine, its load and the date.

    PYTHONPATH=. python benchmarks/call_guard_layouts.py --models sdn_mobilenet,caption_googlenet,blockdrop
"""

from __future__ import annotations

import argparse
import copy
import importlib
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import dycl
from dycl.harness.timing import blocks, machine, taken
from dycl.in_process.tensor_layouts import LayoutCheck

sys.path.append(str(Path(__file__).resolve().parents[1]))  # the zoo (models/)


class _NoLayouts:
    """The guard before layouts were checked."""

    def same(self) -> bool:
        return True


def _with_layouts(guard, layouts):
    variant = copy.copy(guard)
    variant._stamp = (*guard._stamp[:-1], layouts)
    return variant


def _python_layouts(tensors) -> LayoutCheck:
    check = LayoutCheck(tensors)
    check._native_by_mode = dict.fromkeys(check._native_by_mode)
    return check


def _us_per_call(functions: dict[str, Callable[[], object]], calls: int, rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in functions}
    names = list(functions)
    for turn in range(rounds):
        for name in names if turn % 2 == 0 else names[::-1]:
            start = time.perf_counter_ns()
            for _ in range(calls):
                functions[name]()
            times[name].append((time.perf_counter_ns() - start) / calls / 1000)
    return times


def measure(name: str, n: int, calls: int, rounds: int) -> dict:
    zoo = importlib.import_module(f"models.{name}")
    model, example = zoo.build()
    model.eval()
    compiled = dycl.compile(model, example, check=False)
    guard = compiled._call_guard
    guards = {"no layout check": _with_layouts(guard, _NoLayouts()), "native (dycl)": guard,
              "Python fallback": _with_layouts(guard, _python_layouts(guard._tensors))}
    assert guard._stamp[-1].native is not None, "dynamo's native check is unavailable here"
    checks = _us_per_call({label: g.check for label, g in guards.items()}, calls, rounds)

    def calling(variant):
        def call(*args):
            compiled._call_guard = variant
            return compiled(*args)
        return call

    inputs = [x if isinstance(x, tuple) else (x,) for x in (zoo.sample(s) for s in range(n))]
    whole = blocks({label: calling(g) for label, g in guards.items()}, inputs, rounds=rounds)
    compiled._call_guard = guard
    return {"model": name, "tensors": len(guard._tensors), "check_us": checks,
            "call_ms": {label: timing.median_ms for label, timing in whole.items()},
            "call_band_ms": {label: timing.band() for label, timing in whole.items()}}


def _row(result: dict) -> str:
    check = result["check_us"]
    cells = [f"{statistics.median(v):.1f} ({min(v):.1f}–{max(v):.1f})" for v in check.values()]
    calls = [f"{result['call_ms'][k]:.3f} ({result['call_band_ms'][k][0]:.3f}–{result['call_band_ms'][k][1]:.3f})"
             for k in check]
    return f"| {result['model']} | {result['tensors']} | " + " | ".join(cells + calls) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="sdn_mobilenet,caption_googlenet,blockdrop")
    parser.add_argument("-n", type=int, default=12)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", default=str(Path(__file__).with_name("call_guard_layouts.md")))
    args = parser.parse_args()
    load = os.getloadavg()
    rows = [_row(measure(name, args.n, args.calls, args.rounds)) for name in args.models.split(",")]
    labels = ("no layout check", "native (dycl)", "Python fallback")
    lines = [
        "# The weights' layouts in the per-call guard (`benchmarks/call_guard_layouts.py`)", "",
        f"{taken()}; {machine()}; load average before/after {load[0]:.1f} / {os.getloadavg()[0]:.1f}.",
        f"Guard alone: µs per `CallGuard.check`, median (min–max) of {args.rounds} rounds of {args.calls} calls, "
        "the three interleaved. Whole call: ms per in-process call by blocks, median over "
        f"{args.n} zoo inputs (band: lowest–highest round median). Compare within a row only.", "",
        "| model | weights | " + " | ".join(f"check µs: {label}" for label in labels) + " | "
        + " | ".join(f"call ms: {label}" for label in labels) + " |",
        "|---" * (2 + 2 * len(labels)) + "|", *rows, ""]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
