"""Compile time per phase of every zoo model, without the latency part.

    python benchmarks/compile_phases.py [--models blockdrop,ranet] [--runs 3] [--baseline DIR] [--cpu] [--warm]
    python benchmarks/compile_phases.py --ops [--models translation]
    python benchmarks/compile_phases.py --executions [--models blockdrop] [--baseline DIR]

Each model is compiled ``--runs`` times (default symbolic batch, ONNX Runtime) in a
fresh process; the table gives the median of every phase of
``compiled.stats["seconds"]``, "before backend" (every phase up to backend
compilation: rewrite + HCFG) and the total. With ``--baseline DIR`` (a checkout of
another dycl version, e.g. ``git archive main | tar -x -C DIR``) the same runs are
made with that tree's code too, alternating with this one, so that both are measured
side by side on the same (shared) machine; ``--cpu`` measures the compiling process's
CPU time instead of wall-clock time (on a machine shared with other jobs, wall-clock
time mostly measures the others). ``--warm`` compiles the model once in the child before
the measured compile: the table then leaves out what a process pays once (importing
``torch._dynamo`` for the first ``ShapeEnv``, about 1 s of CPU; libcst's first parse),
which a fresh process's first compile includes.

``--executions`` instead counts, in one compile of each tree, the calls of the model's first
leaf module (its first convolution or linear layer) per compile stage and per kind: ``real``
tensors, ``fake`` ones (symbolic shape propagation) or ``export`` (a tracer's), as
``tests/compile/executions.py`` does; ``batch_check`` and ``self_check`` are the eager steps
``dycl.compile`` takes around the stages.

``--ops`` instead counts, in a warm compile's stages up to *explore* (CPU time), the torch
calls that reach ``hcfg.shape_rules.ShapeRules`` during symbolic shape propagation: per
function, how often, how often a direct rule answered it, and the CPU time of the calls;
the calls no rule answered are the ones FakeTensorMode runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ZOO = ["sdn_mobilenet", "sdn_vgg19", "sdn_resnet56", "sdn_wrn32_4", "skipnet_rnn", "skipnet_ff", "blockdrop",
       "caption_resnext", "caption_googlenet", "translation", "ranet"]
#: phases that run after the HCFG is built and optimised (everything else is "before backend")
AFTER = {"compile", "host", "ports", "emit"}

# Runs in the child: maps the dycl packages onto TREE (as the editable install does for ROOT)
_CHILD = r'''
import importlib.machinery, importlib.util, json, sys, time
tree, name = sys.argv[1], sys.argv[2]
packages = {"dycl": tree + "/dycl", "dycl.hcfg": tree + "/hcfg", "dycl.hostgen": tree + "/hostgen",
            "dycl.rewriter": tree + "/rewriter"}

class Finder:
    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname in packages:
            return importlib.util.spec_from_file_location(
                fullname, packages[fullname] + "/__init__.py", submodule_search_locations=[packages[fullname]])
        return None

sys.meta_path.insert(0, Finder)
sys.path.insert(0, tree)
import importlib, types, dycl, dycl.compiler, torch
clock = time.process_time if sys.argv[3] == "cpu" else time.perf_counter
dycl.compiler.time = types.SimpleNamespace(perf_counter=clock)  # the phases' clock, in both versions
zoo = importlib.import_module("models." + name)
model, example = zoo.build()
if sys.argv[4] == "warm":
    dycl.compile(model, example)
start = clock()
compiled = dycl.compile(model, example)
seconds = dict(compiled.stats["seconds"])
seconds["total"] = clock() - start
print(json.dumps(seconds))
'''


# Runs in the child for --executions: the first leaf's calls per stage and kind, in one compile
_EXECUTIONS = _CHILD.split("clock = ")[0] + r'''
import collections, functools, warnings
import dycl.api as api
from torch._subclasses.fake_tensor import FakeTensor
warnings.simplefilter("ignore")
model, example = importlib.import_module("models." + name).build()
leaf = next(m for m in model.modules() if not list(m.children()))
counts, current = collections.Counter(), ["outside"]
plain = type(leaf).forward

def kind(args):
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if any(isinstance(t, FakeTensor) for t in tensors):
        return "fake"
    if torch.jit.is_tracing() or any(type(t) not in (torch.Tensor, torch.nn.Parameter) for t in tensors):
        return "export"
    return "real"

@functools.wraps(plain)  # the rewriter reads the source of the wrapped forward
def forward(self, *args, **kwargs):
    if self is leaf:
        counts[current[0] + ":" + kind(args)] += 1
    return plain(self, *args, **kwargs)

def staged(stage, function):
    @functools.wraps(function)
    def run(*args, **kwargs):
        outer, current[0] = current[0], stage
        try:
            return function(*args, **kwargs)
        finally:
            current[0] = outer
    return run

type(leaf).forward = forward
dycl.compiler.STAGES = tuple((stage, staged(stage, f)) for stage, f in dycl.compiler.STAGES)
api.static_batch_needed = staged("batch_check", api.static_batch_needed)
api._self_check = staged("self_check", api._self_check)
dycl.compile(model, example)
print(json.dumps(counts))
'''


def execution_counts(trees: dict[str, Path], names: list[str]) -> None:
    print("| model | tree | " + " | ".join(("rewrite", "build", "batch_check", "explore", "compile", "emit",
                                             "self_check")) + " |")
    print("|---" * 9 + "|")
    for name in names:
        for label, tree in trees.items():
            out = subprocess.run([sys.executable, "-c", _EXECUTIONS, str(tree), name], capture_output=True,
                                 text=True, check=True, cwd=tree)
            counted = json.loads(out.stdout.strip().splitlines()[-1])
            cells = []
            for stage in ("rewrite", "build", "batch_check", "explore", "compile", "emit", "self_check"):
                kinds = {key.split(":")[1]: n for key, n in counted.items() if key.split(":")[0] == stage}
                cells.append(", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "-")
            print(f"| {name} | {label} | " + " | ".join(cells) + " |", flush=True)


# Runs in the child for --ops: the warm stages up to explore, with every ShapeRules call timed
_OPS = _CHILD.split("clock = ")[0] + r'''
import collections, dycl.compiler as C
from dycl.hcfg import shape_rules
model, example = importlib.import_module("models." + name).build()

def explore():
    value = C.Job(model, example, C.Options(), C.get_backend(C.Options().backend), C.Progress("", 3, False))
    for stage_name, stage in C.STAGES[:4]:
        value = stage(value)

explore()
stats = collections.defaultdict(lambda: [0, 0, 0.0])
answered = []

def noting(rule):
    def wrapped(*args, **kwargs):
        result = rule(*args, **kwargs)
        answered.append(result is not None)
        return result
    return wrapped

plain = shape_rules.ShapeRules.__torch_function__

def timed(self, func, types, args=(), kwargs=None):
    answered.clear()
    start = time.process_time()
    try:
        return plain(self, func, types, args, kwargs)
    finally:
        entry = stats[getattr(func, "__qualname__", str(func))]
        entry[0] += 1
        entry[1] += bool(answered and answered[0])
        entry[2] += time.process_time() - start

shape_rules._RULES.update({func: noting(rule) for func, rule in shape_rules._RULES.items()})
shape_rules.ShapeRules.__torch_function__ = timed
start = time.process_time()
explore()
print(json.dumps({"seconds": time.process_time() - start, "ops": stats}))
'''


def op_counts(name: str) -> None:
    out = subprocess.run([sys.executable, "-c", _OPS, str(ROOT), name], capture_output=True, text=True, check=True,
                         cwd=ROOT)
    counted = json.loads(out.stdout.strip().splitlines()[-1])
    ops = sorted(counted["ops"].items(), key=lambda item: -item[1][2])
    total = sum(seconds for _, _, seconds in counted["ops"].values())
    calls = sum(n for n, _, _ in counted["ops"].values())
    print(f"{name}: rewrite..explore {counted['seconds']:.3f} s (counted), {calls} calls, {total:.3f} s in them")
    print("| function | calls | answered by a rule | CPU s | ms a call |\n|---|---|---|---|---|")
    for func, (calls, answered, seconds) in ops:
        print(f"| `{func}` | {calls} | {answered} | {seconds:.3f} | {1000 * seconds / calls:.2f} |")


def one_run(tree: Path, name: str, clock: str, warm: bool = False) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(tree), name, clock, "warm" if warm else "cold"],
                         capture_output=True, text=True, check=True, cwd=tree)
    seconds = json.loads(out.stdout.strip().splitlines()[-1])
    seconds["before_backend"] = sum(v for k, v in seconds.items() if k not in AFTER and k != "total")
    return seconds


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(ZOO))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="another dycl checkout to measure side by side")
    parser.add_argument("--json", type=Path, help="also write the medians here")
    parser.add_argument("--cpu", action="store_true",
                        help="CPU seconds of the compiling process instead of wall-clock seconds (steadier on a "
                             "shared machine)")
    parser.add_argument("--warm", action="store_true",
                        help="measure a second compile in the same process (no one-time imports)")
    parser.add_argument("--executions", action="store_true",
                        help="count the model's executions per compile stage (this tree and the baseline)")
    parser.add_argument("--ops", action="store_true",
                        help="count the torch calls of symbolic shape propagation per function (this tree only)")
    args = parser.parse_args()
    if args.ops:
        for name in args.models.split(","):
            op_counts(name)
        return
    trees = {"this": ROOT} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    if args.executions:
        execution_counts(trees, args.models.split(","))
        return
    results: dict[str, dict[str, dict[str, float]]] = {}
    for name in args.models.split(","):
        runs: dict[str, list[dict[str, float]]] = {label: [] for label in trees}
        for _ in range(args.runs):
            for label, tree in trees.items():  # alternate: both see the same machine load
                runs[label].append(one_run(tree, name, "cpu" if args.cpu else "wall", args.warm))
        results[name] = {label: medians(r) for label, r in runs.items()}
        for label, row in results[name].items():
            phases = " ".join(f"{k}={v:.3f}" for k, v in row.items())
            print(f"{name:18} {label:8} {phases}", flush=True)
    print()
    columns = [f"{label} {what}" for label in trees for what in ("before backend", "total")]
    print("| model | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for name, rows in results.items():
        cells = [f"{rows[label][key]:.2f}" for label in trees for key in ("before_backend", "total")]
        print(f"| {name} | " + " | ".join(cells) + " |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
