"""Is ``dycl.backends.thread_choice`` stable from one compile to the next (issue 29)?

    python benchmarks/thread_choice_stability.py [--models sdn_resnet56,sdn_wrn32_4,blockdrop] [--trials 3]
                                                 [--compiles 0]

Each model is compiled once with the choice recorded: every graph ``dycl.compiler`` asks about,
with its example. The choice is then made again ``--trials`` times on those graphs, each trial
with a fresh ``settled`` dict, as a new compile would (the counted cost settles the same graphs
every time; only the timed ones can differ). Printed per model, as JSON: how many graphs were
asked about, how many were timed, how many timed graphs got different answers across trials, and
per timed graph the ratio of its pool time to its calling-thread time in each trial (below
``1 / (1 + POOL_MARGIN)``: the pool wins). ``--compiles N`` also compiles the model N times and
compares the manifests' ``threads`` per sub-DNN (slow: a full compile each); ``--margin M`` runs
with ``POOL_MARGIN = M`` (0: the rule before it, the lower median wins).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import warnings
from pathlib import Path

import dycl
from dycl import compiler
from dycl.backends import thread_choice
from dycl.harness.timing import machine, taken

sys.path.append(str(Path(__file__).resolve().parents[1]))  # the zoo (models/)


def recorded_questions(model, example) -> list[tuple]:
    """``(data, example, threads)`` of every choice one compile of ``model`` makes."""
    asked: list[tuple] = []
    original = compiler.on_calling_thread

    def recording(data, example, threads=None, settled=None):
        asked.append((data, example, threads))
        return original(data, example, threads, settled)

    compiler.on_calling_thread = recording
    try:
        dycl.compile(model, example)
    finally:
        compiler.on_calling_thread = original
    return asked


def trial(asked: list[tuple]) -> tuple[list[bool], dict[int, float]]:
    """The answers of one fresh compile's worth of choices, and each timed graph's pool/single ratio."""
    settled: dict[str, bool] = {}
    ratios: dict[int, float] = {}
    original = thread_choice.time_both

    def timed(data, arrays, threads):
        result = original(data, arrays, threads)
        if result is not None:
            ratios[index] = result[1] / result[0] if result[0] else 1.0
        return result

    thread_choice.time_both = timed
    answers = []
    try:
        for index, (data, example, threads) in enumerate(asked):
            answers.append(thread_choice.on_calling_thread(data, example, threads, settled))
    finally:
        thread_choice.time_both = original
    return answers, ratios


def compiled_threads(model, example) -> list:
    manifest = dycl.compile(model, example).manifest
    return [manifest.sub_dnns[name].threads for name in sorted(manifest.sub_dnns)]


def measure(name: str, trials: int, compiles: int) -> dict:
    zoo = importlib.import_module(f"models.{name}")
    model, example = zoo.build()
    model.eval()
    asked = recorded_questions(model, example)
    runs = [trial(asked) for _ in range(trials)]
    answers = [answer for answer, _ in runs]
    timed = sorted({index for _, ratios in runs for index in ratios})
    flips = [index for index in timed if len({run[index] for run in answers}) > 1]
    result = {"model": name, "asked": len(asked), "timed": len(timed), "differing": len(flips),
              "calling_thread": [sum(run) for run in answers],
              "ratios": {index: [round(ratios.get(index, float("nan")), 3) for _, ratios in runs] for index in timed}}
    if compiles:
        threads = [compiled_threads(model, example) for _ in range(compiles)]
        result["compiles_differing_sub_dnns"] = sum(len(set(column)) > 1 for column in zip(*threads))
        result["compiles_calling_thread"] = [sum(t == 1 for t in run) for run in threads]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="sdn_resnet56,sdn_wrn32_4,blockdrop")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--compiles", type=int, default=0)
    parser.add_argument("--margin", type=float, help="POOL_MARGIN to run with (default: the module's)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if args.margin is not None:
        thread_choice.POOL_MARGIN = args.margin
    print(json.dumps({"machine": machine(), "taken": taken(), "pool_margin": thread_choice.POOL_MARGIN}))
    for name in args.models.split(","):
        print(json.dumps(measure(name, args.trials, args.compiles)), flush=True)


if __name__ == "__main__":
    main()
