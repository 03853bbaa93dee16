"""Latency, compile time and memory of dycl against its baselines, side by side in one run.

    python benchmarks/bench.py [--models sdn_vgg19,skipnet_rnn] [-n 50] [--json FILE] [--skip-torch-compile]
                               [--skip-tvm] [--rounds 5] [--fresh-processes 3] [--out FILE]

For each zoo model, on the same inputs: median latency of eager PyTorch,
``torch.compile`` (inductor), dycl on ONNX Runtime, dycl with ``optimize=False``
(the paper's C_no), dycl on TVM (when that backend is available), and the
*per-path oracle*: for every distinct path among the inputs, that path traced
into one ONNX Runtime session (what a perfect host would cost). Latency is timed
by both methods of ``dycl.harness.timing`` in this one process (interleaved, and by
blocks), and eager once more by blocks alone in fresh processes that never created an
ONNX Runtime session: *the* eager by blocks (``eager_column.py`` says why, and how the in-process
eager is checked against it). Prints the headline geomeans (against both eagers, and the
per-model maximum of dycl / oracle + decisions). Also compile
time per phase and the peak RSS of a process running the standalone host
against one running eager PyTorch. Writes ``benchmarks/results.md``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch
from dycl.hcfg.levers import Levers
from eager_column import NOISY_BAND, SLACK, cell, fresh_eager

import dycl
from dycl.harness import traced_baseline
from dycl.harness.paths import model_source_files, record_path
from dycl.harness.timing import blocks, interleaved, machine, taken

RESULTS = Path(__file__).with_name("results.md")
ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # the zoo (models/), which is not installed; after the installed packages


def interleaved_medians(contenders: dict[str, object], inputs, repeat: int = 3) -> dict[str, float]:
    """Median ms per contender by ``dycl.harness.timing.interleaved`` (the method ``dycl.check`` uses:
    warm-up, contenders taking turns on each input, the best of ``repeat`` calls per input)."""
    return {name: timing.median_ms for name, timing in interleaved(contenders, inputs, repeat=repeat).items()}


def block_medians(contenders: dict[str, object], inputs, rounds: int = 3) -> dict[str, float]:
    """Median ms per contender by ``dycl.harness.timing.blocks`` (each contender on all inputs back to
    back, contenders alternating block by block, the best of ``rounds`` per input)."""
    return {name: timing.median_ms for name, timing in blocks(contenders, inputs, rounds=rounds).items()}


def blocks_with_eager(contenders: dict[str, object], inputs, name: str, options) -> dict:
    """``block_medians`` plus the eager column (``eager_column``): the in-process eager's round band,
    eager alone in fresh processes, whether the two agree, and which one the tables call *the* eager."""
    timings = blocks(contenders, inputs, rounds=options.rounds)
    row = {key: timing.median_ms for key, timing in timings.items()}
    row["eager_band_ms"] = list(timings["eager_ms"].band())
    fresh = fresh_eager(name, inputs, processes=options.fresh_processes, rounds=options.rounds)
    row["eager_fresh"] = fresh.to_json()
    row["eager_fresh_ms"] = fresh.median_ms
    row["eager_agrees"] = fresh.agrees(row["eager_ms"])
    return row


def oracles(model, inputs):
    """For each input, callables running the static graph of exactly its path: as traced,
    and also computing the values its branches test. Also the number of distinct paths.
    Each session gets the faster of the calling thread and the pool on its input
    (``traced_baseline(threads="best")``), as dycl's own sub-DNNs do: an oracle held to a pool
    of two that its graph does not pay for would flatter dycl (issue 29)."""
    files = model_source_files(model)
    sessions, keys = {}, []
    with torch.no_grad():
        for args in inputs:
            _, path = record_path(model, *args, files=files)
            if path not in sessions:
                sessions[path] = (traced_baseline(model, args, threads="best"),
                                  traced_baseline(model, args, decisions=True, threads="best"))
            keys.append(path)
    return [sessions[key][0] for key in keys], [sessions[key][1] for key in keys], len(sessions)


_RSS_SCRIPT = r'''
import pickle, sys
mode, artifact, data = sys.argv[1:4]
inputs = pickle.load(open(data, "rb"))
if mode == "host":
    sys.modules["torch"] = None
    import importlib.util
    spec = importlib.util.spec_from_file_location("host", artifact + "/host.py")
    host = importlib.util.module_from_spec(spec); spec.loader.exec_module(host)
    model = host.load(artifact)
    for args in inputs:
        model(*args)
else:
    import importlib, torch
    sys.path.append(sys.argv[4])  # the zoo (models/), after the installed packages
    zoo = importlib.import_module(artifact)
    model, _ = zoo.build()
    with torch.no_grad():
        for args in inputs:
            model(*[torch.from_numpy(a) for a in args])
# VmHWM is this process's peak RSS; ru_maxrss would include the parent's from before exec
peak = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")][0]
print(int(peak.split()[1]) / 1024)
'''


def peak_rss_mb(mode: str, target: str, inputs) -> float:
    import pickle

    with tempfile.TemporaryDirectory() as scratch:
        data = Path(scratch) / "inputs.pkl"
        data.write_bytes(pickle.dumps([tuple(a.numpy() for a in args) for args in inputs]))
        script = Path(scratch) / "rss.py"
        script.write_text(_RSS_SCRIPT)
        out = subprocess.run([sys.executable, str(script), mode, target, str(data), str(ROOT)], capture_output=True,
                             text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def bench_model(name: str, n: int, skip_torch_compile: bool, skip_tvm: bool = False, options=None) -> dict:
    zoo = importlib.import_module(f"models.{name}")
    model, example = zoo.build()
    inputs = [x if isinstance(x, tuple) else (x,) for x in (zoo.sample(s) for s in range(n))]
    row: dict = {"name": name}
    start = time.perf_counter()
    compiled = dycl.compile(model, example)  # the default: per model the faster of host and one graph
    row["compile_s"] = time.perf_counter() - start
    row["default_chosen"] = compiled.stats["single_graph"].get("chosen", "host")
    row["compile_phases_s"] = compiled.stats["seconds"]
    start = time.perf_counter()
    static = dycl.compile(model, example, dynamic=False)  # the cost of symbolic dims: compile and run
    row["compile_static_s"] = time.perf_counter() - start
    noopt = dycl.compile(model, example, optimize=False)
    single = dycl.compile(model, example, optimize=Levers(single_graph="on"))  # one session call, where it lowers
    row["single_graph"] = single.stats["single_graph"].get("chosen", "host")
    host = dycl.compile(model, example, optimize=Levers(single_graph="off"))  # the host calling each sub-DNN
    tvm = None
    try:
        tvm = None if skip_tvm else dycl.compile(model, example, backend="tvm")
    except Exception as exc:  # noqa: BLE001 - reported in the table
        row["tvm_error"] = f"{type(exc).__name__}: {str(exc)[:120]}"
    scratch_artifact = tempfile.TemporaryDirectory()
    artifact = dycl.load(compiled.save(Path(scratch_artifact.name) / "artifact"))  # what a server deploys: no guard
    run_oracle, run_decisions_oracle, paths = oracles(model, inputs)
    row["paths"] = paths
    row["oracle_threads"] = sorted({id(run): run.threads for run in run_decisions_oracle}.values())
    contenders = {"eager_ms": model, "dycl_ms": compiled, "dycl_static_ms": static, "dycl_noopt_ms": noopt,
                  "dycl_single_ms": single, "dycl_host_ms": host, "dycl_artifact_ms": artifact,
                  "oracle_ms": run_oracle, "oracle_decisions_ms": run_decisions_oracle}
    if tvm is not None:
        contenders["dycl_tvm_ms"] = tvm
    if not skip_torch_compile:
        fast = torch.compile(model)
        with torch.no_grad():
            for args in inputs:  # compile every path it will meet before timing
                fast(*args)
        contenders["torch_compile_ms"] = fast
    row.update({"dycl_tvm_ms": None, "torch_compile_ms": None})
    row.update(interleaved_medians(contenders, inputs))
    row["blocks"] = blocks_with_eager(contenders, inputs, name, options)
    with tempfile.TemporaryDirectory() as scratch:
        artifact = compiled.save(Path(scratch) / "artifact")
        row["host_rss_mb"] = peak_rss_mb("host", str(artifact), inputs)
    row["eager_rss_mb"] = peak_rss_mb("eager", f"models.{name}", inputs)
    row["speedup_vs_eager"] = row["eager_ms"] / row["dycl_ms"]
    row["speedup_vs_torch_compile"] = (row["torch_compile_ms"] / row["dycl_ms"]) if row["torch_compile_ms"] else None
    row["ratio_to_oracle"] = row["dycl_ms"] / row["oracle_ms"]
    row["ratio_to_decisions_oracle"] = row["dycl_ms"] / row["oracle_decisions_ms"]
    by_blocks = row["blocks"]
    by_blocks["speedup_vs_eager"] = by_blocks["eager_ms"] / by_blocks["dycl_ms"]
    by_blocks["speedup_vs_fresh_eager"] = by_blocks["eager_fresh_ms"] / by_blocks["dycl_ms"]
    by_blocks["eager_vs_fresh"] = by_blocks["eager_ms"] / by_blocks["eager_fresh_ms"]  # 1.0: the column is fair
    by_blocks["ratio_to_decisions_oracle"] = by_blocks["dycl_ms"] / by_blocks["oracle_decisions_ms"]
    by_blocks["single_to_decisions_oracle"] = by_blocks["dycl_single_ms"] / by_blocks["oracle_decisions_ms"]
    row["single_to_decisions_oracle"] = row["dycl_single_ms"] / row["oracle_decisions_ms"]
    by_blocks["host_vs_fresh_eager"] = by_blocks["eager_fresh_ms"] / by_blocks["dycl_host_ms"]
    by_blocks["host_to_decisions_oracle"] = by_blocks["dycl_host_ms"] / by_blocks["oracle_decisions_ms"]
    row["host_to_decisions_oracle"] = row["dycl_host_ms"] / row["oracle_decisions_ms"]
    by_blocks["artifact_vs_fresh_eager"] = by_blocks["eager_fresh_ms"] / by_blocks["dycl_artifact_ms"]
    by_blocks["artifact_to_decisions_oracle"] = by_blocks["dycl_artifact_ms"] / by_blocks["oracle_decisions_ms"]
    row["artifact_to_decisions_oracle"] = row["dycl_artifact_ms"] / row["oracle_decisions_ms"]
    scratch_artifact.cleanup()
    return row


def load_note(start: float) -> str:
    """The 1-minute load average at the start of a run and now: a table says whether its machine was quiet."""
    return f"load average {start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"


def geomean(values) -> float | None:
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def write_markdown(rows: list[dict], args) -> None:
    def fmt(v, digits=2):
        return "—" if v is None else f"{v:.{digits}f}"

    lines = [
        "# Benchmark results", "",
        f"Command: `python benchmarks/bench.py -n {args.n}"
        + (f" --models {args.models}" if args.models else "")
        + (" --skip-torch-compile" if args.skip_torch_compile else "") + (" --skip-tvm" if args.skip_tvm else "")
        + (f" --rounds {args.rounds}" if args.rounds != 5 else "")
        + (f" --fresh-processes {args.fresh_processes}" if args.fresh_processes != 3 else "") + "`",
        f"Machine: {machine()}; run {taken()}; {load_note(args.load)}.",
        "Latency (`dycl.harness.timing`), both methods in this one run: **interleaved** (the first table: warm-up, "
        "contenders taking turns on each input, per input the best of 3 calls) and **by blocks** (the second: "
        "each contender on all inputs back to back, contenders alternating block by block, per input the best of "
        f"{args.rounds} rounds; eager also alone in {args.fresh_processes} fresh processes); then the median over "
        "inputs (ms). Environment: as given (the bench sets only `TVM_THREAD_POOL_SPIN_COUNT=0` for itself and "
        f"its child processes; `OMP_NUM_THREADS`: {os.environ.get('OMP_NUM_THREADS', 'unset')}, "
        f"`OMP_WAIT_POLICY`: {os.environ.get('OMP_WAIT_POLICY', 'unset')}).",
        "",
        "Per-path oracle: each distinct path traced into one ONNX Runtime session (the trace drops the tests of "
        "the path's branches); *+ decisions*: the same graph also computing every tensor value Python read on "
        "the way (what any host must compute to choose the path). Each oracle session runs on the calling thread "
        "or with the pool, whichever ran its path faster when it was built (timed in turns), as dycl chooses per "
        "sub-DNN.", "",
        "| model | paths | eager | torch.compile | dycl ORT | dycl ORT no-opt | dycl TVM | per-path oracle | "
        "oracle + decisions | vs eager | vs torch.compile | / oracle | / oracle + decisions | compile s | "
        "host RSS MB | eager RSS MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['name']} | {r['paths']} | {fmt(r['eager_ms'])} | {fmt(r['torch_compile_ms'])} | "
            f"{fmt(r['dycl_ms'])} | "
            f"{fmt(r['dycl_noopt_ms'])} | {fmt(r['dycl_tvm_ms'])} | {fmt(r['oracle_ms'])} | "
            f"{fmt(r['oracle_decisions_ms'])} | "
            f"{fmt(r['speedup_vs_eager'])}x | {fmt(r['speedup_vs_torch_compile'])}x | {fmt(r['ratio_to_oracle'])} | "
            f"{fmt(r['ratio_to_decisions_oracle'])} | "
            f"{fmt(r['compile_s'], 1)} | {fmt(r['host_rss_mb'], 0)} | {fmt(r['eager_rss_mb'], 0)} |")
    lines += ["", f"Geometric mean speed-up over eager: {fmt(geomean(r['speedup_vs_eager'] for r in rows))}x; "
              f"over torch.compile: {fmt(geomean(r['speedup_vs_torch_compile'] for r in rows))}x; "
              f"dycl / oracle: {fmt(geomean(r['ratio_to_oracle'] for r in rows))}; "
              f"dycl / oracle + decisions: {fmt(geomean(r['ratio_to_decisions_oracle'] for r in rows))}; "
              f"host RSS / eager RSS: {fmt(geomean(r['host_rss_mb'] / r['eager_rss_mb'] for r in rows))}.", ""]
    phases = ["", "Compile time per phase (s; the process first compiled a tiny model, which took "
              f"{args.warmup_s:.1f} s: what a process pays on its first compile only):", "",
              "| model | rewrite | hcfg | rewrite + hcfg | backend compile | host |", "|---|---|---|---|---|---|"]
    for r in rows:
        p = r["compile_phases_s"]
        phases.append(f"| {r['name']} | {p['rewrite']:.2f} | {p['hcfg']:.2f} | {p['rewrite'] + p['hcfg']:.2f} | "
                      f"{p['compile']:.2f} | {p['host']:.3f} |")
    dynamic = ["", "Symbolic (default: batch dim symbolic) against static (`dynamic=False`) compilation:", "",
               "| model | compile s symbolic | compile s static | compile ratio | ms symbolic | ms static | "
               "latency ratio |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        dynamic.append(f"| {r['name']} | {r['compile_s']:.1f} | {r['compile_static_s']:.1f} | "
                       f"{r['compile_s'] / r['compile_static_s']:.2f} | {fmt(r['dycl_ms'])} | "
                       f"{fmt(r['dycl_static_ms'])} | {r['dycl_ms'] / r['dycl_static_ms']:.2f} |")
    args.out.write_text("\n".join(lines + blocks_table(rows) + phases + dynamic) + "\n")


def blocks_table(rows: list[dict]) -> list[str]:
    """The latency table timed by blocks; its eager is eager alone in fresh processes (``eager_column``)."""

    def fmt(v: float | None) -> str:
        return "—" if v is None else f"{v:.2f}"

    lines = ["", "Timed by blocks (what a serving loop sees). *eager*: eager alone by blocks in fresh processes that "
             "never created an ONNX Runtime session, the median over the processes (their lowest–highest median): "
             "the eager the acceptance means. *eager, this process*: eager timed among the other contenders "
             "(in brackets the lowest–highest of its rounds' own medians; the figure, each input's best over the "
             "rounds, lies at or below them); ✓ where it lies within the fresh band (±"
             f"{SLACK:.0%}), ✗ where not; *noisy*: the fresh processes' medians differ by more than {NOISY_BAND}x. "
             "Why both: `benchmarks/eager_neighbours.md`.", "",
             "| model | eager | eager, this process | torch.compile | dycl ORT | dycl one graph | per-path oracle | "
             "oracle + decisions | vs eager | vs eager, this process | / oracle + decisions | "
             "one graph / oracle + decisions | dycl host form | host form vs eager | host form / oracle + decisions | "
             "dycl artifact | artifact vs eager | artifact / oracle + decisions |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        b = r["blocks"]
        low, high = b["eager_band_ms"]
        mark = "✓" if b["eager_agrees"] else "✗"
        lines.append(f"| {r['name']} | {cell(b['eager_fresh'])} | {fmt(b['eager_ms'])} ({low:.2f}–{high:.2f}) {mark} | "
                     f"{fmt(b.get('torch_compile_ms'))} | {default_cell(r)} | {one_graph(r)} | "
                     f"{fmt(b['oracle_ms'])} | "
                     f"{fmt(b['oracle_decisions_ms'])} | {fmt(b['speedup_vs_fresh_eager'])}x | "
                     f"{fmt(b['speedup_vs_eager'])}x | {fmt(b['ratio_to_decisions_oracle'])} | "
                     f"{fmt(b['single_to_decisions_oracle'])} | {fmt(b['dycl_host_ms'])} | "
                     f"{fmt(b['host_vs_fresh_eager'])}x | {fmt(b['host_to_decisions_oracle'])} | "
                     f"{fmt(b['dycl_artifact_ms'])} | {fmt(b['artifact_vs_fresh_eager'])}x | "
                     f"{fmt(b['artifact_to_decisions_oracle'])} |")
    return lines + ["", *summary(rows)]


def summary(rows: list[dict]) -> list[str]:
    """The headline numbers (printed, and under the blocks table): geomeans against both eagers, and the
    per-model maximum of dycl / oracle + decisions beside its geomean (issue 29's acceptance)."""

    def fmt(v: float | None) -> str:
        return "—" if v is None else f"{v:.2f}"

    def worst(key: str, blocks_: bool) -> str:
        ratios = {r["name"]: (r["blocks"] if blocks_ else r)[key] for r in rows}
        name = max(ratios, key=ratios.get)
        return f"max {ratios[name]:.2f} ({name})"

    agree = sum(r["blocks"]["eager_agrees"] for r in rows)
    noisy = [r["name"] for r in rows if r["blocks"]["eager_fresh"]["noisy"]]
    by_blocks = [r["blocks"] for r in rows]
    return [
        f"By blocks: dycl is {fmt(geomean(b['speedup_vs_fresh_eager'] for b in by_blocks))}x eager (fresh processes) "
        f"and {fmt(geomean(b['speedup_vs_eager'] for b in by_blocks))}x eager in this process (geomeans; the "
        f"in-process eager agrees with the fresh band on {agree} of {len(rows)} models"
        + (f"; the fresh processes disagree by more than {NOISY_BAND}x on {', '.join(noisy)}: not a quiet run"
           if noisy else "") + "); "
        f"dycl / oracle + decisions {fmt(geomean(b['ratio_to_decisions_oracle'] for b in by_blocks))} "
        f"({worst('ratio_to_decisions_oracle', True)}); one graph (`Levers(single_graph=\"on\")`; the host where "
        "a model does not lower) / oracle + decisions "
        f"{fmt(geomean(b['single_to_decisions_oracle'] for b in by_blocks))}; the host form "
        "(`Levers(single_graph=\"off\")`, the default before 2026-11-28) is "
        f"{fmt(geomean(b['host_vs_fresh_eager'] for b in by_blocks))}x eager (fresh processes), / oracle + decisions "
        f"{fmt(geomean(b['host_to_decisions_oracle'] for b in by_blocks))} "
        f"({worst('host_to_decisions_oracle', True)}); the saved artifact (`dycl.load`, the default compile: "
        "no per-call guard, what a server deploys) is "
        f"{fmt(geomean(b['artifact_vs_fresh_eager'] for b in by_blocks))}x eager (fresh processes), / oracle + "
        f"decisions {fmt(geomean(b['artifact_to_decisions_oracle'] for b in by_blocks))} "
        f"({worst('artifact_to_decisions_oracle', True)}).",
        f"Interleaved: dycl / oracle + decisions {fmt(geomean(r['ratio_to_decisions_oracle'] for r in rows))} "
        f"({worst('ratio_to_decisions_oracle', False)}); one graph / oracle + decisions "
        f"{fmt(geomean(r['single_to_decisions_oracle'] for r in rows))}; host form / oracle + decisions "
        f"{fmt(geomean(r['host_to_decisions_oracle'] for r in rows))} "
        f"({worst('host_to_decisions_oracle', False)}); dycl is "
        f"{fmt(geomean(r['speedup_vs_eager'] for r in rows))}x eager (interleaved in this process)."]


def one_graph(row: dict) -> str:
    """The one-graph column's time, marked where the model kept its host."""
    ms = f"{row['blocks']['dycl_single_ms']:.2f}"
    return ms if row["single_graph"] == "single_graph" else f"{ms} (host)"


def default_cell(row: dict) -> str:
    """The default compile's time by blocks and the form it kept for this model."""
    kept = "one graph" if row["default_chosen"] == "single_graph" else "host"
    return f"{row['blocks']['dycl_ms']:.2f} ({kept})"


def quiet_neighbours() -> None:
    """No thread of another runtime in this process spins while eager torch runs (issue 29): torch's
    OpenMP team waits at every barrier for each of its threads, so a neighbour that holds a core in a
    spin (TVM's pool spins after each job, its workers pinned to cores) slows every small parallel region
    of eager; dycl's and the oracles' ONNX Runtime sessions do not spin. Process-wide settings, so the
    benchmark sets them for itself (a library must not); one already set by the caller is kept."""
    os.environ.setdefault("TVM_THREAD_POOL_SPIN_COUNT", "0")


def warm_up() -> float:
    """Compile a tiny model once, so that no model's compile phases include what a process pays
    on its first compile only (the first ``ShapeEnv`` imports ``torch._dynamo``): seconds spent."""

    class Tiny(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if x.sum() > 0:
                return x * 2
            return -x

    start = time.perf_counter()
    dycl.compile(Tiny().eval(), torch.ones(1, 3))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help="comma-separated zoo names (default: all)")
    parser.add_argument("-n", type=int, default=50)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--out", type=Path, default=RESULTS, help="the markdown written (default: results.md)")
    parser.add_argument("--skip-torch-compile", action="store_true")
    parser.add_argument("--skip-tvm", action="store_true")
    parser.add_argument("--rounds", type=int, default=5, help="rounds by blocks (eager is bimodal: more than 3)")
    parser.add_argument("--fresh-processes", type=int, default=3, help="fresh processes timing eager alone")
    args = parser.parse_args()
    args.load = os.getloadavg()[0]
    quiet_neighbours()
    warnings.simplefilter("ignore")
    from models import ZOO

    names = args.models.split(",") if args.models else [z.split(".")[-1] for z in ZOO]
    args.warmup_s = warm_up()
    rows = []
    for name in names:
        row = bench_model(name, args.n, args.skip_torch_compile, args.skip_tvm, args)
        print(json.dumps({k: v for k, v in row.items() if k != "compile_phases_s"}), flush=True)
        rows.append(row)
    write_markdown(rows, args)
    print("\n".join(summary(rows)))
    if args.json:
        keys = ["name", "eager_ms", "torch_compile_ms", "dycl_ms", "dycl_noopt_ms", "dycl_tvm_ms", "oracle_ms",
                "speedup_vs_eager", "speedup_vs_torch_compile", "ratio_to_oracle", "compile_s", "host_rss_mb",
                "eager_rss_mb", "oracle_decisions_ms", "ratio_to_decisions_oracle", "compile_phases_s", "blocks",
                "paths", "dycl_single_ms", "single_graph", "single_to_decisions_oracle", "default_chosen",
                "dycl_host_ms", "host_to_decisions_oracle", "dycl_artifact_ms", "artifact_to_decisions_oracle"]
        args.json.write_text(json.dumps({"models": [{k: r.get(k) for k in keys} for r in rows]}, indent=2) + "\n")


if __name__ == "__main__":
    main()
