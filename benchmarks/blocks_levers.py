"""dycl timed by blocks against oracle + decisions and eager, with the form choice's stability (issue 29).

    python benchmarks/blocks_levers.py [--models sdn_mobilenet,ranet] [-n 20] [--rounds 5] [--autos 3]
                                       [--out FILE.md] [--json FILE] [--picks-only] [--before FILE.json ...]
                                       [--rows FILE.json ...]

For each zoo model, in one process and on the same zoo inputs, timed by blocks
(``dycl.harness.timing.blocks``: each contender on all inputs back to back, contenders alternating
block by block, each input's best over ``--rounds`` rounds, the median over inputs): eager PyTorch
(in this process), the host form (``Levers(single_graph="off")``), the one graph on the calling
thread and in a pool (``"on"``, its thread setting then flipped), each saved and loaded
(``dycl.load``: what a server runs, without the in-process model's per-call guards of weights,
globals and configuration), the last ``"auto"`` compile in process (*in process*), and
*oracle + decisions* (``benchmarks/bench.py``: each input's path traced into one ONNX Runtime
session that also computes the values its branches test).

Stability of the form choice: the model is compiled ``--autos`` times with ``"auto"``; each
compile's pick and compile time are recorded, and *dycl* is the loaded form the majority kept (ties:
the last compile's). *best form* is the fastest of host and one graph here: the choice's error is
dycl / best form. Writes a markdown table with the machine, its load and the date.

Before / after: ``--picks-only --json FILE`` only compiles (the picks and compile times), e.g. with
an older checkout first on ``PYTHONPATH``; ``--before FILE`` (repeatable: the rows of several runs)
then adds *dycl before*, the form those compiles kept most often, timed in this process: both
sides' forms are timed side by side, block by block.
"""

from __future__ import annotations

import argparse
import collections
import importlib
import json
import math
import os
import sys
import time
import warnings
from pathlib import Path

from dycl.hcfg.levers import Levers

import dycl
from dycl.harness.timing import blocks, machine

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # the zoo (models/)
sys.path.append(str(ROOT / "benchmarks"))
from bench import oracles  # noqa: E402 - after the paths above

MODELS = ("sdn_mobilenet", "sdn_vgg19", "sdn_resnet56", "sdn_wrn32_4", "skipnet_rnn", "skipnet_ff", "blockdrop",
          "caption_resnext", "caption_googlenet", "translation", "ranet")


def _loaded(compiled, flip: bool = False):
    """``compiled`` saved and loaded (``dycl.load``: no per-call guards of the in-process model), with
    its sessions' thread setting flipped where ``flip`` (a one-graph model's one session)."""
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "artifact"
        compiled.save(path)
        if flip:
            manifest = json.loads((path / "manifest.json").read_text())
            for entry in manifest["sub_dnns"].values():  # threads 1: on the calling thread; absent: the pool
                if entry.pop("threads", None) != 1:
                    entry["threads"] = 1
            (path / "manifest.json").write_text(json.dumps(manifest))
        return dycl.load(path)


def _form(stats: dict) -> str:
    if stats.get("chosen") != "single_graph":
        return "host"
    return "one graph (caller)" if stats.get("on_calling_thread") else "one graph (pool)"


def bench_model(name: str, n: int, rounds: int, autos: int, picks_only: bool = False) -> dict:
    zoo = importlib.import_module(f"models.{name}")
    model, example = zoo.build()
    inputs = [x if isinstance(x, tuple) else (x,) for x in (zoo.sample(s) for s in range(n))]
    row: dict = {"name": name, "picks": [], "compile_s": [], "choice": []}
    for _ in range(autos):
        start = time.perf_counter()
        auto = dycl.compile(model, example)
        row["compile_s"].append(round(time.perf_counter() - start, 2))
        stats = auto.stats["single_graph"]
        row["picks"].append(_form(stats))
        row["choice"].append({key: stats.get(key) for key in ("host_us", "single_graph_us_by_thread", "timed_rounds",
                                                               "reason")})
    row["dycl_form"] = _majority(row["picks"])
    if picks_only:
        return row
    host = dycl.compile(model, example, optimize=Levers(single_graph="off"))
    single = dycl.compile(model, example, optimize=Levers(single_graph="on"))
    contenders = {"eager": model, "host": _loaded(host), "dycl in process": auto}
    if single.stats["single_graph"].get("chosen") == "single_graph":
        form = _form(single.stats["single_graph"])
        contenders[form] = _loaded(single)
        contenders["one graph (pool)" if "caller" in form else "one graph (caller)"] = _loaded(single, flip=True)
    _, decisions, row["paths"] = oracles(model, inputs)
    contenders["oracle + decisions"] = decisions
    timings = blocks(contenders, inputs, rounds=rounds)
    row["ms"] = {key: timing.median_ms for key, timing in timings.items()}
    return row


def _majority(picks: list[str]) -> str:
    counts = collections.Counter(picks)
    return next(pick for pick in reversed(picks) if counts[pick] == max(counts.values()))


def table(rows: list[dict], before: dict[str, dict]) -> list[str]:
    lines = ["| model | paths | auto picks (of compiles) | compile s | eager | host | one graph caller | "
             "one graph pool | oracle + decisions | dycl | dycl / oracle + dec. | dycl vs eager | dycl / best form "
             "| before: picks | before: dycl | before / oracle + dec. | before vs eager | in process |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    ratios, speedups, old_ratios, old_speedups = [], [], [], []
    for row in rows:
        ms = row["ms"]
        dycl_ms = ms[row["dycl_form"]]
        old = before.get(row["name"])
        old_ms = ms.get(old["dycl_form"]) if old else None
        forms = [ms[key] for key in ("host", "one graph (caller)", "one graph (pool)") if key in ms]
        picks = ", ".join(f"{form} {count}" for form, count in collections.Counter(row["picks"]).items())
        ratios.append(dycl_ms / ms["oracle + decisions"])
        speedups.append(ms["eager"] / dycl_ms)
        cells = [ms.get(key) for key in ("eager", "host", "one graph (caller)", "one graph (pool)",
                                         "oracle + decisions")]
        old_cells = ["—"] * 4
        if old_ms is not None:
            old_ratios.append(old_ms / ms["oracle + decisions"])
            old_speedups.append(ms["eager"] / old_ms)
            old_picks = ", ".join(f"{form} {count}" for form, count in collections.Counter(old["picks"]).items())
            old_cells = [old_picks, f"{old_ms:.3f}", f"{old_ratios[-1]:.2f}", f"{old_speedups[-1]:.2f}x"]
        lines.append(f"| {row['name']} | {row['paths']} | {picks} | {max(row['compile_s']):.1f} | "
                     + " | ".join("—" if c is None else f"{c:.3f}" for c in cells)
                     + f" | {dycl_ms:.3f} | {ratios[-1]:.2f} | {speedups[-1]:.2f}x | {dycl_ms / min(forms):.2f} | "
                     + " | ".join(old_cells) + f" | {ms['dycl in process']:.3f} |")
    lines += ["", f"Geomeans: dycl / oracle + decisions {_geomean(ratios):.2f} (max {max(ratios):.2f}); "
              f"dycl vs eager (this process) {_geomean(speedups):.2f}x."]
    if old_ratios:
        lines.append(f"Before ({len(old_ratios)} models): / oracle + decisions {_geomean(old_ratios):.2f} "
                     f"(max {max(old_ratios):.2f}); vs eager {_geomean(old_speedups):.2f}x.")
    return lines


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("-n", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--autos", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--picks-only", action="store_true")
    parser.add_argument("--before", type=Path, action="append", default=[])
    parser.add_argument("--rows", type=Path, action="append", default=[],
                        help="tabulate the rows of earlier runs (their --json) instead of running")
    args = parser.parse_args()
    before = {row["name"]: row for path in args.before for row in json.loads(path.read_text())}
    warnings.simplefilter("ignore")
    start_load = os.getloadavg()[0]
    rows = [row for path in args.rows for row in json.loads(path.read_text())]
    for name in ([] if rows else args.models.split(",")):
        rows.append(bench_model(name, args.n, args.rounds, args.autos, args.picks_only))
        print(json.dumps(rows[-1]), flush=True)
        if args.json:  # after each model: a run cut short keeps what it measured
            args.json.write_text(json.dumps(rows, indent=1))
    if args.picks_only:
        return
    lines = [f"{machine()}; load average {start_load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
             f"`python benchmarks/blocks_levers.py --models {args.models} -n {args.n} --rounds {args.rounds} "
             f"--autos {args.autos}`", "", *table(rows, before)]
    print("\n".join(lines))
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
