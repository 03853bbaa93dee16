"""What each of dycl's levers buys: every lever turned off (or a default-off one on) by itself,
side by side with everything on, on the same inputs in one run.

    python benchmarks/ablation.py [--models sdn_vgg19,skipnet_rnn] [-n 20] [--rounds 5] [--batch 32] [--json FILE]

Compile-time levers (``hcfg.levers.Levers``; and ``DYCL_ORT_SPECIALIZE=off`` where this tree has
it: shape specialization, set while compiling and loading) are compiled in this process and timed on
the host (numpy in, numpy out) by both methods of ``dycl.harness.timing``: **by blocks** (each
setting on all inputs back to back, settings alternating, ``--rounds`` rounds) and **interleaved**
(settings taking turns input by input). The levers: conditions computed in their producers,
sub-DNNs merged into producers and across host renames (``residual = h``), the paper's §5.4
(``optimize=False``), identical sub-DNNs compiled once, each sub-DNN's thread choice (small graphs on
the calling thread), and the single-graph lowering (one ONNX model with ``If`` nodes: the default
``auto`` times it against the host at compile time and keeps the faster; ``on`` always lowers, ``off``
always keeps the host). Where the default keeps the one graph, the levers of the host form (merges,
thread choice) change little: their effect on the host form is the ``off`` row against the others.

Host levers are switched in the generated host's process, so each setting runs the saved artifact
in a process of its own (``--rounds`` rounds, the settings taking turns; the median round is
reported; each process times every input back to back, best of 3 per input): one global thread pool
(``DYCL_ORT_POOL=global``, an opt-in), the call path (``DYCL_ORT_CALL=iobinding``; and the public
``InferenceSession.run`` instead of its binding, by replacing the host's ``_runner``), the input
checks' precomputed plan (off: every call checks each input with ``_check_input``, by replacing the
host's ``_inputs_fit``), and sessions created at load (``DYCL_ORT_LOAD=lazy``). A replaced function
the host does not have is reported as such, not timed.

``--batch B`` (0: skipped) adds per-sample predication at batch B: ``per_sample=True`` with
``Levers(predicate=False)`` against the default, by blocks on 3 batches (``benchmarks/batch.md`` has
the full per-sample table). Writes ``benchmarks/ablation.md``; machine and date are in it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from unittest import mock

from bench import geomean, load_note
from dycl.hcfg.levers import Levers

import dycl
from dycl.api import from_result
from dycl.compiler import compile_model
from dycl.harness.timing import blocks, interleaved, machine, taken
from dycl.per_sample.testing import batch_of

RESULTS = Path(__file__).with_name("ablation.md")
ROOT = Path(__file__).resolve().parents[1]
SPECIALIZE = "DYCL_ORT_SPECIALIZE"  # s29shape's switch; the row is kept only where this tree reads it

#: name -> (Levers, environment while compiling and loading), everything else on
COMPILE_SETTINGS: dict[str, tuple[Levers, dict[str, str]]] = {
    "all on": (Levers(), {}),
    "no merge into producers": (Levers(merge_into_producers=False), {}),
    "no merge across renames": (Levers(merge_across_renames=False), {}),
    # merging would fold a test's own sub-DNN back into its producer: both off
    "no merge, no conditions in producers": (Levers(conditions_in_producers=False, merge_into_producers=False), {}),
    "no §5.4 (optimize=False)": (Levers.of(False), {}),
    "no reuse of identical sub-DNNs": (Levers(reuse_identical=False), {}),
    "no thread choice (every sub-DNN in the pool)": (Levers(small_graphs_on_caller=False), {}),
    "single graph on (one ONNX model with If nodes)": (Levers(single_graph="on"), {}),
    "single graph off (the host form, the default before 2026-11-28)": (Levers(single_graph="off"), {}),
    "no shape specialization (DYCL_ORT_SPECIALIZE=off)": (Levers(), {SPECIALIZE: "off"}),
}

#: name -> (environment of the host process, host functions replaced: "runner" / "input_plan")
HOST_SETTINGS: dict[str, tuple[dict[str, str], str]] = {
    "all on": ({}, ""),
    "one global thread pool (opt-in)": ({"DYCL_ORT_POOL": "global"}, ""),
    "IOBinding, outputs bound once": ({"DYCL_ORT_CALL": "iobinding"}, ""),
    "public InferenceSession.run": ({}, "runner"),
    "no input-check plan (each input checked)": ({}, "input_plan"),
    "sessions created on first call": ({"DYCL_ORT_LOAD": "lazy"}, ""),
}


def tree_reads(variable: str) -> bool:
    """Whether this tree's library code names an environment variable (a lever another branch adds)."""
    return any(variable in path.read_text() for path in (ROOT / "dycl").rglob("*.py"))


_HOST_SCRIPT = r'''
import importlib.util, json, pickle, statistics, sys, time
sys.modules["torch"] = None
artifact, data, repeat, patch = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
inputs = pickle.load(open(data, "rb"))
start = time.perf_counter()
spec = importlib.util.spec_from_file_location("host", artifact + "/host.py")
host = importlib.util.module_from_spec(spec)
spec.loader.exec_module(host)
replaced = {"runner": ("_runner", lambda session, feeds_every_input: session.run),
            "input_plan": ("_inputs_fit", lambda plan, arguments: False)}.get(patch)
if replaced is not None:
    if not hasattr(host, replaced[0]):
        print(json.dumps({"missing": replaced[0]}))
        sys.exit(0)
    setattr(host, replaced[0], replaced[1])
model = host.load(artifact)
loaded = time.perf_counter()
model(*inputs[0])
first = time.perf_counter()
times = []
for args in inputs:
    best = float("inf")
    for _ in range(repeat):
        begin = time.perf_counter()
        model(*args)
        best = min(best, time.perf_counter() - begin)
    times.append(best)
print(json.dumps({"load_ms": (loaded - start) * 1000, "first_call_ms": (first - loaded) * 1000,
                  "ms": statistics.median(times) * 1000}))
'''


def host_overhead(compiled, inputs, repeat: int = 3) -> tuple[float, float]:
    """Median over inputs of (host call ms, ms of that call spent inside the compiled
    sub-DNNs), numpy in and out: what the generated Python adds to the sessions."""
    host = compiled._host
    spent = [0.0]

    def timed(executable):
        def call(*args):
            start = time.perf_counter()
            try:
                return executable(*args)
            finally:
                spent[0] += time.perf_counter() - start
        return call

    saved = host._variants
    host._variants = {index: {key: timed(e) for key, e in variants.items()} for index, variants in saved.items()}
    saved_calls, host._call = host._call, {index: next(iter(v.values())) for index, v in host._variants.items()
                                           if len(v) == 1}
    totals, inside = [], []
    try:
        for args in inputs:
            arrays = [a.numpy() for a in args]
            best = (math.inf, math.inf)
            for _ in range(repeat):
                spent[0] = 0.0
                start = time.perf_counter()
                host(*arrays)
                best = min(best, (time.perf_counter() - start, spent[0]))
            totals.append(best[0])
            inside.append(best[1])
    finally:
        host._variants, host._call = saved, saved_calls
    return statistics.median(totals) * 1000, statistics.median(inside) * 1000


def compile_levers(model, example, inputs, rounds: int) -> tuple[dict[str, dict], object]:
    """Each compile setting: latency by blocks and interleaved, compile seconds, sub-DNNs."""
    compiled, rows = {}, {}
    settings = {name: setting for name, setting in COMPILE_SETTINGS.items()
                if SPECIALIZE not in setting[1] or tree_reads(SPECIALIZE)}
    for name, (levers, env) in settings.items():
        with mock.patch.dict(os.environ, env):
            start = time.perf_counter()
            result = compile_model(model, example, levers=levers)
            seconds = time.perf_counter() - start
            compiled[name] = from_result(result)
        rows[name] = {"compile_s": seconds, "sub_dnns": result.stats["sub_dnns"],
                      "files": len(result.files), "artifact_mb": sum(map(len, result.files.values())) / 2**20,
                      "single_graph": result.stats.get("single_graph", {}).get("chosen", "host")}
    numpy_inputs = [tuple(a.numpy() for a in args) for args in inputs]
    runs = {name: model_.run_numpy for name, model_ in compiled.items()}
    for name, timing in blocks(runs, numpy_inputs, rounds=rounds).items():
        rows[name]["ms"], rows[name]["band_ms"] = timing.median_ms, list(timing.band())
    for name, timing in interleaved(runs, numpy_inputs).items():
        rows[name]["interleaved_ms"] = timing.median_ms
    rows["all on"]["host_ms"], rows["all on"]["sessions_ms"] = host_overhead(compiled["all on"], inputs)
    return rows, compiled["all on"]


def host_levers(compiled, inputs, rounds: int) -> dict[str, dict]:
    """Each host setting, in a process of its own, the settings taking turns."""
    samples: dict[str, list[dict]] = {name: [] for name in HOST_SETTINGS}
    with tempfile.TemporaryDirectory() as scratch:
        artifact = compiled.save(Path(scratch) / "artifact")
        data = Path(scratch) / "inputs.pkl"
        data.write_bytes(pickle.dumps([tuple(a.numpy() for a in args) for args in inputs]))
        script = Path(scratch) / "host_run.py"
        script.write_text(_HOST_SCRIPT)
        for _ in range(rounds):
            for name, (env, patch) in HOST_SETTINGS.items():
                out = subprocess.run([sys.executable, str(script), str(artifact), str(data), "3", patch or "-"],
                                     capture_output=True, text=True, check=True, env={**os.environ, **env})
                samples[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {name: runs[0] if "missing" in runs[0] else
            {key: statistics.median(s[key] for s in runs) for key in runs[0]} for name, runs in samples.items()}


def predication(zoo, model, example, size: int, rounds: int) -> dict:
    """Per-sample batches of ``size``: predication on (the default) and off, by blocks on 3 batches."""
    try:
        settings = {"predicated (default)": dycl.compile(model, example, per_sample=True, progress=False),
                    "routed (predicate=False)": dycl.compile(model, example, per_sample=True, progress=False,
                                                             optimize=Levers(predicate=False))}
    except Exception as error:  # noqa: BLE001 - a model per-sample mode refuses is reported in the table
        return {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:100]}"}
    batches = [batch_of([zoo.sample(10_000 + b * size + i) for i in range(size)]) for b in range(3)]
    timings = blocks(settings, batches, rounds=rounds, warmup_inputs=3)
    return {name: {"ms": t.median_ms, "band_ms": list(t.band())} for name, t in timings.items()}


def ablate(name: str, args) -> dict:
    zoo = importlib.import_module(f"models.{name}")
    model, example = zoo.build()
    model.eval()
    inputs = [x if isinstance(x, tuple) else (x,) for x in (zoo.sample(s) for s in range(args.n))]
    compile_rows, compiled = compile_levers(model, example, inputs, args.rounds)
    row = {"name": name, "compile": compile_rows, "host": host_levers(compiled, inputs, args.host_rounds)}
    if args.batch:
        row["per_sample"] = predication(zoo, model, example, args.batch, args.rounds)
    print(json.dumps(row), flush=True)
    return row


def _ratio(rows: list[dict], section: str, setting: str, key: str) -> float | None:
    """Geomean over the models of the setting's ``key`` over everything on (models that have it)."""
    return geomean(row[section][setting][key] / row[section]["all on"][key] for row in rows
                   if key in row[section].get(setting, {}))


def compile_section(rows: list[dict]) -> list[str]:
    lines = ["## Compile-time levers (host in this process, numpy in and out)", "",
             "ms: by blocks (band: the lowest–highest round median); interleaved beside it. Ratio: the setting's "
             "latency over the default (> 1: the default is faster: a lever on by default helps, a default-off "
             "one would not). *(one graph)*: the compile kept the single-graph lowering (else the host form).", "",
             "| model | setting | ms by blocks (band) | ratio | ms interleaved | ratio | sub-DNNs | files | "
             "artifact MB | compile s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        base = row["compile"]["all on"]
        for setting, r in row["compile"].items():
            low, high = r["band_ms"]
            lowered = " (one graph)" if r["single_graph"] == "single_graph" else ""
            lines.append(f"| {row['name']} | {setting}{lowered} | {r['ms']:.3f} ({low:.3f}–{high:.3f}) | "
                         f"{r['ms'] / base['ms']:.2f} | {r['interleaved_ms']:.3f} | "
                         f"{r['interleaved_ms'] / base['interleaved_ms']:.2f} | {r['sub_dnns']} | {r['files']} | "
                         f"{r['artifact_mb']:.2f} | {r['compile_s']:.1f} |")
    lines += ["", "Geometric mean ratio over the models (by blocks; interleaved):", ""]
    for setting in COMPILE_SETTINGS:
        by_blocks = _ratio(rows, "compile", setting, "ms")
        if by_blocks is None:
            lines.append(f"- {setting}: not in this tree")
            continue
        lines.append(f"- {setting}: {by_blocks:.3f}; {_ratio(rows, 'compile', setting, 'interleaved_ms'):.3f}")
    lines += ["", "The host's own Python around the sub-DNN calls, everything on (numpy in and out; per input the "
              "best of 3 calls, then medians over inputs):", "",
              "| model | host ms | inside sub-DNNs ms | host / sub-DNNs |", "|---|---|---|---|"]
    for row in rows:
        r = row["compile"]["all on"]
        lines.append(f"| {row['name']} | {r['host_ms']:.3f} | {r['sessions_ms']:.3f} | "
                     f"{r['host_ms'] / r['sessions_ms']:.3f} |")
    return lines


def host_section(rows: list[dict]) -> list[str]:
    lines = ["", "## Host levers (the saved artifact, one process per setting, median of the rounds)", "",
             "Each process times every input back to back (the best of 3 calls per input, the median over inputs); "
             "ratio as above.", "",
             "| model | setting | ms | ratio | load ms | first call ms |", "|---|---|---|---|---|---|"]
    for row in rows:
        base = row["host"]["all on"]["ms"]
        for setting, r in row["host"].items():
            if "missing" in r:
                lines.append(f"| {row['name']} | {setting} | — (the host has no `{r['missing']}`) | | | |")
                continue
            lines.append(f"| {row['name']} | {setting} | {r['ms']:.3f} | {r['ms'] / base:.2f} | "
                         f"{r['load_ms']:.0f} | {r['first_call_ms']:.2f} |")
    lines += ["", "Geometric mean ratio over the models (steady state; first call for lazy sessions):", ""]
    for setting in HOST_SETTINGS:
        ratio = _ratio(rows, "host", setting, "first_call_ms" if "first call" in setting else "ms")
        lines.append(f"- {setting}: " + ("not measured" if ratio is None else f"{ratio:.3f}"))
    return lines


def per_sample_section(rows: list[dict], size: int) -> list[str]:
    lines = ["", f"## Per-sample predication (`per_sample=True`, batches of {size}, by blocks on 3 batches)", "",
             "| model | predicated ms (band) | routed ms (band) | routed / predicated |", "|---|---|---|---|"]
    ratios = []
    for row in rows:
        found = row.get("per_sample", {})
        if "error" in found:
            lines.append(f"| {row['name']} | refused: {found['error']} | | |")
            continue
        on, off = found["predicated (default)"], found["routed (predicate=False)"]
        ratios.append(off["ms"] / on["ms"])
        lines.append(f"| {row['name']} | {on['ms']:.2f} ({on['band_ms'][0]:.2f}–{on['band_ms'][1]:.2f}) | "
                     f"{off['ms']:.2f} ({off['band_ms'][0]:.2f}–{off['band_ms'][1]:.2f}) | {ratios[-1]:.2f} |")
    mean = geomean(ratios)
    return lines + ["", "Geometric mean routed / predicated: " + ("—" if mean is None else f"{mean:.3f}")]


def write_markdown(rows: list[dict], args) -> None:
    command = f"python benchmarks/ablation.py -n {args.n} --rounds {args.rounds} --batch {args.batch}" + (
        f" --models {args.models}" if args.models else "")
    lines = ["# Ablation: what each lever buys", "", f"Command: `{command}`",
             f"Machine: {machine()}; run {taken()}; {load_note(args.load)}.",
             "Each row turns one lever off (or a default-off one on) with everything else as by default; the "
             "module docstring of `benchmarks/ablation.py` says how each is switched.", ""]
    lines += compile_section(rows) + host_section(rows)
    if args.batch:
        lines += per_sample_section(rows, args.batch)
    args.out.write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help="comma-separated zoo names (default: all)")
    parser.add_argument("-n", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5, help="rounds by blocks")
    parser.add_argument("--host-rounds", type=int, default=3, help="processes per host setting")
    parser.add_argument("--batch", type=int, default=32, help="per-sample batch size (0: no predication table)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--out", type=Path, default=RESULTS, help="the markdown written (default: ablation.md)")
    args = parser.parse_args()
    args.load = os.getloadavg()[0]
    warnings.simplefilter("ignore")
    from models import ZOO

    names = args.models.split(",") if args.models else [z.split(".")[-1] for z in ZOO]
    rows = [ablate(name, args) for name in names]
    write_markdown(rows, args)
    if args.json:
        args.json.write_text(json.dumps({"models": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
