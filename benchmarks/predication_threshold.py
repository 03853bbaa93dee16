"""Routed against if-converted per-sample compiles, per model and batch size: what ``PREDICATE_MACS`` rests on.

    python benchmarks/predication_threshold.py [--models sdn_vgg19,...] [--sizes 8,32,128] [--rounds 6]

For each zoo model whose conditions can all be if-converted (``dycl.per_sample.predicate``), two
``per_sample=True`` compiles: *routed* (``Levers(predicate=False)``: every condition splits the
batch into groups) and *converted* (``PREDICATE_MACS`` and ``REJOIN_MACS_PER_GATE`` lifted, so
every condition is a selection inside one graph). On 6 batches of B samples, each round calls
each compile on each batch 3 times back to back (its median is the batch's time), the two in
turns whose order flips every round. Reported: ms per batch, median and quartiles over rounds
and batches, and converted / routed (below 1: if-conversion pays). The MACs per sample are
the count ``check_predicable`` compares (``dycl.backends.onnx_cost``), for the first graph it
refuses with both limits at 0 (per gate where the graph holds rejoining gates).

Writes ``benchmarks/predication_threshold.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import re
import statistics
import sys
import time
import warnings
from pathlib import Path
from unittest import mock

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dycl.hcfg.levers import Levers  # noqa: E402

import dycl  # noqa: E402
from dycl.per_sample import predicable_onnx  # noqa: E402
from dycl.per_sample.testing import batch_of  # noqa: E402

MODELS = "sdn_mobilenet,sdn_vgg19,sdn_wrn32_4,sdn_resnet56,skipnet_ff,blockdrop"
BLOCK = 3


def _ms(function) -> float:
    start = time.perf_counter()
    function()
    return (time.perf_counter() - start) * 1000.0


def compare(name: str, sizes: list[int], rounds: int) -> list[dict]:
    """One row per batch size: the two compiles' times on the same batches (module docstring)."""
    zoo = importlib.import_module(f"models.{name}")
    model, example = zoo.build()
    routed = dycl.compile(model, example, per_sample=True, progress=False, optimize=Levers(predicate=False))
    with mock.patch.object(predicable_onnx, "PREDICATE_MACS", float("inf")), \
            mock.patch.object(predicable_onnx, "REJOIN_MACS_PER_GATE", float("inf")):
        converted = dycl.compile(model, example, per_sample=True, progress=False)
    counts = converted.stats.get("per_sample", {})
    counted = _declined_count(model, example)
    rows = []
    for size in sizes:
        batches = [batch_of([zoo.sample(20_000 + 1_000 * b + i) for i in range(size)]) for b in range(6)]
        times: dict[str, list[float]] = {"routed": [], "converted": []}
        with torch.no_grad():
            for compiled in (routed, converted):  # every path's session is created before timing
                for batch in batches:
                    compiled(*batch)
            for round_ in range(rounds):
                order = [("routed", routed), ("converted", converted)][::1 if round_ % 2 == 0 else -1]
                for batch in batches:
                    for key, compiled in order:
                        times[key].append(statistics.median(_ms(lambda c=compiled, b=batch: c(*b))
                                                            for _ in range(BLOCK)))
        summary = {key: (statistics.median(values), *statistics.quantiles(values, n=4)[::2])
                   for key, values in times.items()}
        rows.append({"model": name, "size": size, "counts": counts, "macs": counted, **summary,
                     "ratio": summary["converted"][0] / summary["routed"][0]})
        print(f"{name} B={size}: converted/routed {rows[-1]['ratio']:.2f}", file=sys.stderr, flush=True)
    return rows


def _declined_count(model: torch.nn.Module, example) -> str:
    """The multiply-accumulates the rule counted, as its refusal says it with both limits at 0."""
    with mock.patch.object(predicable_onnx, "PREDICATE_MACS", 0), \
            mock.patch.object(predicable_onnx, "REJOIN_MACS_PER_GATE", 0):
        compiled = dycl.compile(model, example, per_sample=True, progress=False)
    found = re.search(r"([\d,]+) multiply-accumulates per sample", compiled.stats["per_sample"].get(
        "predication_declined", ""))
    return f"{int(found.group(1).replace(',', '')) / 1e6:.1f} M" if found else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=MODELS)
    parser.add_argument("--sizes", default="8,32,128", type=lambda s: [int(v) for v in s.split(",")])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    rows = [row for name in args.models.split(",") for row in compare(name, args.sizes, args.rounds)]
    lines = ["# Routed against if-converted per-sample compiles (issue 29)", "",
             f"Command: `python benchmarks/predication_threshold.py --models {args.models} "
             f"--sizes {','.join(map(str, args.sizes))} --rounds {args.rounds}`",
             f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__} with "
             f"{torch.get_num_threads()} intra-op threads; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
             f"load average {os.getloadavg()[0]:.1f} at the end.", "",
             "ms per batch, median [quartiles] over rounds and batches; each batch's time is the median of "
             f"{BLOCK} calls back to back, the two compiles in turns (see the script's docstring).", "",
             "| model | MACs per sample (the first graph the rule refuses) | B | routed ms | converted ms "
             "| converted / routed |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        routed, converted = row["routed"], row["converted"]
        lines.append(f"| {row['model']} | {row['macs']} | {row['size']} | {routed[0]:.2f} "
                     f"[{routed[1]:.2f}, {routed[2]:.2f}] | {converted[0]:.2f} [{converted[1]:.2f}, "
                     f"{converted[2]:.2f}] | {row['ratio']:.2f} |")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "predication_threshold.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
