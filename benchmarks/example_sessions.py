"""The session for the example's sizes made at load (``SubDNNEntry.sizes``), against the host without
it and against the static compile, side by side in one process (issue 29).

    python benchmarks/example_sessions.py [--models blockdrop,ranet,sdn_mobilenet,skipnet_rnn] [-n 10]
                                          [--rounds 5] [--loads 3]

Contenders, each loaded from a saved artifact: ``before`` (the symbolic compile with ``sizes`` taken
out of its manifest: the host specializes a size the second time it sees it, inside that call),
``after`` (the symbolic compile as saved) and ``static`` (``dynamic=False``). Printed per model, one
JSON line: ``load_ms`` and ``first_pass_ms`` / ``first_pass_max_ms`` (a fresh load, then every input
called once: the total and the slowest call; medians over ``--loads`` fresh loads, contenders
taking turns), and ``blocks_ms`` (``dycl.harness.timing.blocks`` after every contender has seen every
input twice: the steady state).
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import dycl
from dycl.harness.timing import blocks

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # the zoo (models/), which is not installed


def artifacts(name: str, scratch: Path) -> tuple[dict[str, Path], list[tuple]]:
    """The three artifacts of zoo model ``name`` and its inputs."""
    zoo = importlib.import_module(f"models.{name}")
    model, example = zoo.build()
    symbolic = dycl.compile(model, example).save(scratch / "after")
    dycl.compile(model, example, dynamic=False).save(scratch / "static")
    before = Path(shutil.copytree(symbolic, scratch / "before"))
    manifest = json.loads((before / "manifest.json").read_text())
    for entry in manifest["sub_dnns"].values():
        entry.pop("sizes", None)
    (before / "manifest.json").write_text(json.dumps(manifest))
    paths = {"before": before, "after": symbolic, "static": scratch / "static"}
    return paths, [x if isinstance(x, tuple) else (x,) for x in (zoo.sample(s) for s in range(ARGS.n))]


def first_pass(path: Path, inputs: list[tuple]) -> tuple[float, float, float]:
    """(load ms, first pass total ms, its slowest call ms) of a fresh load."""
    start = time.perf_counter()
    loaded = dycl.load(path)
    load = time.perf_counter() - start
    calls = []
    for args in inputs:
        start = time.perf_counter()
        loaded(*args)
        calls.append(time.perf_counter() - start)
    return load * 1000, sum(calls) * 1000, max(calls) * 1000


def measure(name: str) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        paths, inputs = artifacts(name, Path(scratch))
        cold = {label: [] for label in paths}
        for _ in range(ARGS.loads):
            for label, path in paths.items():
                cold[label].append(first_pass(path, inputs))
        loaded = {label: dycl.load(path) for label, path in paths.items()}
        for model in loaded.values():
            for _ in range(2):
                for args in inputs:
                    model(*args)
        steady = blocks(loaded, inputs, rounds=ARGS.rounds)
    row = {"model": name}
    for field, index in (("load_ms", 0), ("first_pass_ms", 1), ("first_pass_max_ms", 2)):
        row[field] = {label: round(statistics.median(r[index] for r in runs), 2) for label, runs in cold.items()}
    row["blocks_ms"] = {label: round(timing.median_ms, 3) for label, timing in steady.items()}
    return row


def main() -> None:
    for name in ARGS.models.split(","):
        print(json.dumps(measure(name)), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="blockdrop,ranet,sdn_mobilenet,skipnet_rnn")
    parser.add_argument("-n", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--loads", type=int, default=3)
    ARGS = parser.parse_args()
    main()
