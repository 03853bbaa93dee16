"""What each of dycl's levers buys: every lever turned off on its own, side by side
with everything on, on the same inputs in one run.

    python benchmarks/ablation.py [--models sdn_vgg19,skipnet_rnn] [-n 30] [--rounds 3] [--json FILE]

Compile-time levers (``hcfg.levers.Levers`` and ``optimize``) are compiled in this
process and timed interleaved on the host (numpy in, numpy out): conditions computed
in their producers, sub-DNNs merged into producers, sub-DNNs merged across host renames
(``residual = h``), the paper's §5.4 (identity and
constant outputs to the host: ``optimize=False`` turns it off), and identical
sub-DNNs compiled once. Host levers are switched by environment variables of the
generated host, so each setting runs the saved artifact in a process of its own
(``--rounds`` rounds, the settings taking turns; the median round is reported): one
global thread pool (``DYCL_ORT_POOL=global``: an opt-in, the default is a pool per
session), ``session.run`` with a feed dict against IOBinding with outputs bound once (``DYCL_ORT_CALL=iobinding``), and
sessions created at load (``DYCL_ORT_LOAD=lazy``).
Writes ``benchmarks/ablation.md``.
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

from bench import geomean, interleaved_medians
from dycl.hcfg.levers import Levers

from dycl.api import from_result
from dycl.compiler import compile_model

RESULTS = Path(__file__).with_name("ablation.md")

#: name -> (compile_model keyword arguments), everything else on
COMPILE_SETTINGS: dict[str, dict] = {
    "all on": {},
    "no merge into producers": {"levers": Levers(merge_into_producers=False)},
    "no merge across renames": {"levers": Levers(merge_across_renames=False)},
    # merging would fold a test's own sub-DNN back into its producer: both off
    "no merge, no conditions in producers": {"levers": Levers(conditions_in_producers=False,
                                                              merge_into_producers=False)},
    "no §5.4 (optimize=False)": {"levers": Levers.of(False)},
    "no reuse of identical sub-DNNs": {"levers": Levers(reuse_identical=False)},
    "small graphs in the thread pool too": {"levers": Levers(small_graphs_on_caller=False)},
    # off by default: the whole graph as one ONNX model with If nodes (dycl.backends.single_graph_stage)
    "one graph with If nodes (single_graph='on')": {"levers": Levers(single_graph="on")},
}

#: name -> environment of the host process
HOST_SETTINGS: dict[str, dict[str, str]] = {
    "all on": {},
    "one global thread pool (opt-in)": {"DYCL_ORT_POOL": "global"},
    "IOBinding, outputs bound once": {"DYCL_ORT_CALL": "iobinding"},
    "sessions created on first call": {"DYCL_ORT_LOAD": "lazy"},
}

_HOST_SCRIPT = r'''
import importlib.util, json, pickle, statistics, sys, time
sys.modules["torch"] = None
artifact, data, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
inputs = pickle.load(open(data, "rb"))
start = time.perf_counter()
spec = importlib.util.spec_from_file_location("host", artifact + "/host.py")
host = importlib.util.module_from_spec(spec)
spec.loader.exec_module(host)
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


def compile_levers(model, example, inputs) -> dict[str, dict]:
    """Each compile setting: latency (interleaved), compile seconds, sub-DNN calls."""
    compiled, rows = {}, {}
    for name, options in COMPILE_SETTINGS.items():
        start = time.perf_counter()
        result = compile_model(model, example, **options)
        seconds = time.perf_counter() - start
        compiled[name] = from_result(result)
        rows[name] = {"compile_s": seconds, "sub_dnns": result.stats["sub_dnns"],
                      "files": len(result.files), "artifact_mb": sum(map(len, result.files.values())) / 2**20}
    numpy_inputs = [tuple(a.numpy() for a in args) for args in inputs]
    runs = {name: model_.run_numpy for name, model_ in compiled.items()}
    for name, ms in interleaved_medians(runs, numpy_inputs).items():
        rows[name]["ms"] = ms
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
            for name, env in HOST_SETTINGS.items():
                out = subprocess.run([sys.executable, str(script), str(artifact), str(data), "3"],
                                     capture_output=True, text=True, check=True, env={**os.environ, **env})
                samples[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {name: {key: statistics.median(s[key] for s in runs) for key in runs[0]} for name, runs in samples.items()}


def ablate(name: str, n: int, rounds: int) -> dict:
    zoo = importlib.import_module(f"models.{name}")
    model, example = zoo.build()
    model.eval()
    inputs = [x if isinstance(x, tuple) else (x,) for x in (zoo.sample(s) for s in range(n))]
    compile_rows, compiled = compile_levers(model, example, inputs)
    host_rows = host_levers(compiled, inputs, rounds)
    print(json.dumps({"name": name, "compile": compile_rows, "host": host_rows}), flush=True)
    return {"name": name, "compile": compile_rows, "host": host_rows}


def write_markdown(rows: list[dict], args) -> None:
    command = f"python benchmarks/ablation.py -n {args.n} --rounds {args.rounds}" + (
        f" --models {args.models}" if args.models else "")
    lines = ["# Ablation: what each lever buys", "", f"Command: `{command}`",
             f"Machine: {os.cpu_count()} CPUs; ONNX Runtime one global pool of "
             f"{os.environ.get('DYCL_THREADS') or os.cpu_count()} threads unless stated.",
             "Latency: per input the best of 3 calls, then the median over inputs (ms). Ratio: the setting's latency "
             "over everything on (> 1: the lever helps).", "",
             "## Compile-time levers (host in this process, settings interleaved per input)", "",
             "| model | setting | ms | ratio | sub-DNNs | files | artifact MB | compile s |",
             "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        base = row["compile"]["all on"]["ms"]
        for setting, r in row["compile"].items():
            lines.append(f"| {row['name']} | {setting} | {r['ms']:.3f} | {r['ms'] / base:.2f} | {r['sub_dnns']} | "
                         f"{r['files']} | {r['artifact_mb']:.2f} | {r['compile_s']:.1f} |")
    lines += ["", "Geometric mean ratio over the models:", ""]
    for setting in COMPILE_SETTINGS:
        ratio = geomean(row["compile"][setting]["ms"] / row["compile"]["all on"]["ms"] for row in rows)
        lines.append(f"- {setting}: {ratio:.3f}")
    lines += ["", "## Host overhead", "",
              "The host's own Python around the sub-DNN calls, everything on (numpy in and out; per input the "
              "best of 3 calls, then medians over inputs):", "",
              "| model | host ms | inside sub-DNNs ms | host / sub-DNNs |", "|---|---|---|---|"]
    for row in rows:
        r = row["compile"]["all on"]
        lines.append(f"| {row['name']} | {r['host_ms']:.3f} | {r['sessions_ms']:.3f} | "
                     f"{r['host_ms'] / r['sessions_ms']:.3f} |")
    lines += ["", "## Host levers (the saved artifact, one process per setting, median of the rounds)", "",
              "| model | setting | ms | ratio | load ms | first call ms |", "|---|---|---|---|---|---|"]
    for row in rows:
        base = row["host"]["all on"]["ms"]
        for setting, r in row["host"].items():
            lines.append(f"| {row['name']} | {setting} | {r['ms']:.3f} | {r['ms'] / base:.2f} | "
                         f"{r['load_ms']:.0f} | {r['first_call_ms']:.2f} |")
    lines += ["", "Geometric mean ratio over the models (steady state; first call for lazy sessions):", ""]
    for setting in HOST_SETTINGS:
        key = "first_call_ms" if "first call" in setting else "ms"
        ratio = geomean(row["host"][setting][key] / row["host"]["all on"][key] for row in rows)
        lines.append(f"- {setting}: {ratio:.3f}")
    RESULTS.write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help="comma-separated zoo names (default: all)")
    parser.add_argument("-n", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    from models import ZOO

    names = args.models.split(",") if args.models else [z.split(".")[-1] for z in ZOO]
    rows = [ablate(name, args.n, args.rounds) for name in names]
    write_markdown(rows, args)
    if args.json:
        args.json.write_text(json.dumps({"models": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
