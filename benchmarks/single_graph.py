"""The host against the single-graph lowering against the oracle with decisions (issue 29).

    python benchmarks/single_graph.py [--models sdn_mobilenet,ranet] [-n 30] [--rounds 3]

For each zoo model, in one process and on the same inputs: dycl as the host program calling
each sub-DNN (``Levers(single_graph="off")``), dycl as one ONNX model with ``If`` nodes
(``"on"``), what ``"auto"`` kept (and its compile time), and *oracle + decisions* (each
input's path traced into one ONNX Runtime session that also computes the values its branches
test: ``benchmarks/bench.py``'s oracle). Median ms
by blocks and interleaved (``dycl.harness.timing``), and each dycl form's ratio to the oracle.
Prints a markdown table with the machine and its load."""

from __future__ import annotations

import argparse
import importlib
import math
import os
import sys
import time
from pathlib import Path

from dycl.hcfg.levers import Levers

import dycl
from dycl.harness.timing import machine

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # the zoo (models/)
sys.path.append(str(ROOT / "benchmarks"))
from bench import block_medians, interleaved_medians, oracles  # noqa: E402 - after the paths above

MODELS = ("sdn_mobilenet", "ranet", "sdn_vgg19", "skipnet_rnn", "blockdrop", "caption_resnext", "caption_googlenet")


def bench_model(name: str, n: int, rounds: int) -> dict:
    zoo = importlib.import_module(f"models.{name}")
    model, example = zoo.build()
    inputs = [x if isinstance(x, tuple) else (x,) for x in (zoo.sample(s) for s in range(n))]
    host = dycl.compile(model, example, optimize=Levers(single_graph="off"))
    start = time.perf_counter()
    single = dycl.compile(model, example, optimize=Levers(single_graph="on"))
    row = {"name": name, "compile_on_s": time.perf_counter() - start, "lowered": single.stats["single_graph"],
           "lower_stage_s": single.stats["stages"]["lower"]}
    start = time.perf_counter()
    auto = dycl.compile(model, example, optimize=Levers(single_graph="auto"))
    row["compile_auto_s"] = time.perf_counter() - start
    row["auto"] = {key: auto.stats["single_graph"].get(key)
                   for key in ("chosen", "host_us", "single_graph_us", "on_calling_thread")}
    _, decisions, row["paths"] = oracles(model, inputs)
    contenders = {"host": host, "single_graph": single, "auto": auto, "oracle_decisions": decisions}
    row["blocks"] = block_medians(contenders, inputs, rounds=rounds)
    row["interleaved"] = interleaved_medians(contenders, inputs, repeat=rounds)
    return row


def table(rows: list[dict]) -> list[str]:
    lines = ["| model | paths | auto chose | host ms | single graph ms | auto ms | oracle + decisions ms | "
             "host / oracle | single / oracle | single / host | auto / host | compile auto s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for method in ("blocks", "interleaved"):
        lines.append(f"| **{method}** ||||||||||||")
        for row in rows:
            t = row[method]
            chose = row["auto"]["chosen"] + ("" if row["auto"]["chosen"] == "host" else
                                            " (calling thread)" if row["auto"]["on_calling_thread"] else " (pool)")
            lines.append(f"| {row['name']} | {row['paths']} | {chose} | {t['host']:.3f} | "
                         f"{t['single_graph']:.3f} | {t['auto']:.3f} | {t['oracle_decisions']:.3f} | "
                         f"{t['host'] / t['oracle_decisions']:.2f} | {t['single_graph'] / t['oracle_decisions']:.2f} "
                         f"| {t['single_graph'] / t['host']:.2f} | {t['auto'] / t['host']:.2f} "
                         f"| {row['compile_auto_s']:.1f} |")
        for key in ("host", "single_graph", "auto"):
            ratios = [row[method][key] / row[method]["oracle_decisions"] for row in rows]
            geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
            lines.append(f"| geomean {key} / oracle + decisions ({method}) | {geomean:.2f} | max {max(ratios):.2f} "
                         "||||||||||")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("-n", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows = []
    for name in args.models.split(","):
        rows.append(bench_model(name, args.n, args.rounds))
        print(name, rows[-1], flush=True)
    print(f"\n{machine()}; load average {os.getloadavg()[0]:.2f}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print("\n".join(table(rows)))


if __name__ == "__main__":
    main()
