"""What the per-call sample of the weights' contents costs: ``CallGuard.check`` with and without it.

Builds the guards from a zoo model's weights (no compile: the check reads only them), then times
``check`` both ways, interleaved round by round, and the sample's gather alone at several budgets
(``dycl.in_process.weight_contents.SAMPLE_BUDGET``). Prints one JSON line per model, in µs (medians
of ``--rounds`` rounds of ``--calls`` calls each).

    OMP_NUM_THREADS=1 python benchmarks/weight_contents.py --models sdn_mobilenet
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from dycl.in_process.call_guard import CallGuard
from dycl.in_process.staleness import WeightGuard
from dycl.in_process.weight_contents import ContentSample

sys.path.append(str(Path(__file__).resolve().parents[1]))  # the zoo (models/)


def _per_call_us(functions: dict[str, Callable[[], object]], calls: int, rounds: int) -> dict[str, float]:
    """Median µs per call of each function, the functions interleaved within every round."""
    times: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(rounds):
        for name, function in functions.items():
            start = time.perf_counter_ns()
            for _ in range(calls):
                function()
            times[name].append((time.perf_counter_ns() - start) / calls / 1000)
    return {name: round(statistics.median(values), 3) for name, values in times.items()}


def measure(name: str, calls: int, rounds: int) -> dict:
    zoo = importlib.import_module(f"models.{name}")
    model, _ = zoo.build()
    model.eval()
    before = CallGuard(WeightGuard(model, contents=False), None, None)
    after = CallGuard(WeightGuard(model), None, None)
    checks = _per_call_us({"before": before.check, "after": after.check}, calls, rounds)
    tensors = after._tensors
    samples = {budget: ContentSample(tensors, budget) for budget in (256, 1024, 2048, 4096)}
    gathers = _per_call_us({f"{budget} ({len(sample)} words)": sample.same for budget, sample in samples.items()},
                           calls, rounds)
    return {"model": name, "tensors": len(tensors), "check_us": checks,
            "added_us": round(checks["after"] - checks["before"], 3), "gather_us": gathers}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="sdn_mobilenet")
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    for name in args.models.split(","):
        print(json.dumps(measure(name, args.calls, args.rounds)), flush=True)


if __name__ == "__main__":
    main()
