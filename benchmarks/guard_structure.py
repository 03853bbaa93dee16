"""Per-call cost of the structure and default-dtype guards (``dycl.in_process.structure_guard``,
``dtype_guard``) inside ``CallGuard``, on the zoo's models, side by side with ``CallGuard`` without them.

    PYTHONPATH=. python benchmarks/guard_structure.py [--models sdn_resnet56,sdn_mobilenet] [--rounds 15]

No compile: each model's ``CallGuard`` is built from its weights (as ``dycl.api._guarded`` builds it,
without globals or folded attributes), once with and once without the two new guards. Each round
times ``check()`` ``--calls`` times per contender (``perf_counter_ns`` around the loop, per call),
the contenders alternating and their order flipped every round. Writes medians and spread (min-max)
of the rounds, µs per call, to ``benchmarks/guard_structure.json`` and prints them.
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import statistics
import time
from pathlib import Path

from dycl.in_process.call_guard import CallGuard
from dycl.in_process.dtype_guard import DefaultDtypeGuard
from dycl.in_process.globals_guard import GlobalsGuard
from dycl.in_process.staleness import WeightGuard
from dycl.in_process.structure_guard import StructureGuard


def _per_call_us(guard: CallGuard, calls: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(calls):
        guard.check()
    return (time.perf_counter_ns() - start) / calls / 1000


def measure(name: str, rounds: int, calls: int) -> dict:
    model, _ = importlib.import_module(f"models.{name}").build()
    model.eval()
    structure = StructureGuard(model)
    contenders = {"without": CallGuard(WeightGuard(model), GlobalsGuard([]), None),
                  "with": CallGuard(WeightGuard(model), GlobalsGuard([]), None, structure, DefaultDtypeGuard())}
    times: dict[str, list[float]] = {key: [] for key in contenders}
    for round_ in range(rounds):
        order = list(contenders) if round_ % 2 == 0 else list(reversed(contenders))
        for key in order:
            times[key].append(_per_call_us(contenders[key], calls))
    row = {"model": name, "modules": len(list(model.modules())), "slots": len(structure.keys),
           "hook_tables": len(structure.hook_tables)}
    for key, values in times.items():
        row[key] = {"median_us": round(statistics.median(values), 2),
                    "min_us": round(min(values), 2), "max_us": round(max(values), 2)}
    row["added_us"] = round(row["with"]["median_us"] - row["without"]["median_us"], 2)
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="sdn_resnet56,sdn_mobilenet,skipnet_rnn")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    rows = [measure(name, args.rounds, args.calls) for name in args.models.split(",")]
    result = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": platform.platform(),
              "how": "CallGuard.check() timed in loops of --calls, contenders alternating per round", "rows": rows}
    Path(__file__).with_name("guard_structure.json").write_text(json.dumps(result, indent=1) + "\n")
    for row in rows:
        print(json.dumps(row))


if __name__ == "__main__":
    main()
