"""The cost of a boundary, side by side in one process (issue 29): the per-call guards as
three checks against ``dycl.in_process.call_guard.CallGuard`` (``--lever guards``); each
sub-DNN's thread by counted MACs only against counted-then-timed
(``dycl.backends.thread_choice``, ``--lever threads``); sub-DNNs merged across host renames
or not (``hcfg.merge_renames``, ``--lever renames``); and the ONNX Runtime runs per call.

    python benchmarks/boundary_levers.py [--models sdn_mobilenet,skipnet_rnn,sdn_resnet56] [-n 20] [--rounds 7]
                                         [--lever guards,threads,renames]

Each model is compiled once; the two settings then take turns, round by round, on the
same inputs (each round: every input once per setting, the settings' order alternating),
and the median and spread (min-max) of the rounds' per-call medians are printed as JSON
lines. Compare ratios within one run only: the machine may be loaded.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import time
from pathlib import Path

from dycl.hcfg.levers import Levers

import dycl
import dycl.compiler
from dycl.backends.onnx_cost import runs_on_calling_thread

sys.path.append(str(Path(__file__).resolve().parents[1]))  # the zoo (models/)


class _ThreeChecks:
    """The call path before ``CallGuard``: the three guards one after another."""

    def __init__(self, compiled: dycl.CompiledModel) -> None:
        self.guards = [g for g in (compiled._guard, compiled._globals_guard, compiled._config_guard) if g is not None]

    def check(self) -> None:
        for guard in self.guards:
            guard.check()


def per_call_us(function, inputs, repeat: int = 3) -> float:
    times = []
    for args in inputs:
        best = float("inf")
        for _ in range(repeat):
            start = time.perf_counter()
            function(*args)
            best = min(best, time.perf_counter() - start)
        times.append(best)
    return statistics.median(times) * 1e6


def side_by_side(settings: dict[str, object], inputs, rounds: int) -> dict[str, dict[str, float]]:
    samples: dict[str, list[float]] = {name: [] for name in settings}
    names = list(settings)
    for round_ in range(rounds):
        for name in names if round_ % 2 == 0 else names[::-1]:
            samples[name].append(per_call_us(settings[name], inputs))
    return {name: {"median_us": statistics.median(s), "min_us": min(s), "max_us": max(s)}
            for name, s in samples.items()}


def ort_runs_per_call(compiled: dycl.CompiledModel, inputs) -> float:
    """Mean number of sub-DNN executable calls (ONNX Runtime runs) per call over ``inputs``."""
    host, count = compiled._host, [0]

    def counted(executable):
        def call(*args):
            count[0] += 1
            return executable(*args)
        return call

    saved, saved_calls = host._variants, host._call
    host._variants = {index: {key: counted(e) for key, e in v.items()} for index, v in saved.items()}
    host._call = {index: next(iter(v.values())) for index, v in host._variants.items() if len(v) == 1}
    try:
        for args in inputs:
            compiled(*args)
    finally:
        host._variants, host._call = saved, saved_calls
    return count[0] / len(inputs)


def _zoo(name: str, n: int):
    zoo = importlib.import_module(f"models.{name}")
    model, example = zoo.build()
    model.eval()
    return model, example, [x if isinstance(x, tuple) else (x,) for x in (zoo.sample(s) for s in range(n))]


def _by_macs_only(data: bytes, example: dict) -> bool:
    """The choice before ``thread_choice``: counted MACs at the example's shapes only."""
    return runs_on_calling_thread(data, {k: tuple(v.shape) for k, v in example.items() if hasattr(v, "shape")})


def _on_caller(compiled: dycl.CompiledModel) -> str:
    threads = [entry.threads for entry in compiled.manifest.sub_dnns.values()]
    return f"{threads.count(1)}/{len(threads)}"


def measure_threads(name: str, n: int, rounds: int) -> dict:
    """Per-call time with each sub-DNN's thread chosen by MACs only, and counted-then-timed."""
    model, example, inputs = _zoo(name, n)
    chosen, choosing = dycl.compiler.on_calling_thread, [0.0]

    def clocked(*args):
        start = time.perf_counter()
        try:
            return chosen(*args)
        finally:
            choosing[0] += time.perf_counter() - start

    dycl.compiler.on_calling_thread = clocked
    try:
        timed = dycl.compile(model, example, check=False)
    finally:
        dycl.compiler.on_calling_thread = chosen
    dycl.compiler.on_calling_thread = _by_macs_only
    try:
        counted = dycl.compile(model, example, check=False)
    finally:
        dycl.compiler.on_calling_thread = chosen
    calls = side_by_side({"MACs only": counted, "counted, then timed": timed}, inputs, rounds)
    return {"model": name, "lever": "threads", "on_calling_thread": {"MACs only": _on_caller(counted),
            "counted, then timed": _on_caller(timed)}, "choosing_s": choosing[0], "call": calls,
            "ort_runs_per_call": ort_runs_per_call(timed, inputs)}


def measure_renames(name: str, n: int, rounds: int) -> dict:
    """Per-call time and runtime calls per call with sub-DNNs merged across host renames and not."""
    model, example, inputs = _zoo(name, n)
    compiled = {"merged across renames": dycl.compile(model, example, check=False),
                "not": dycl.compile(model, example, check=False, optimize=Levers(merge_across_renames=False))}
    return {"model": name, "lever": "renames", "sub_dnns": {k: c.stats["sub_dnns"] for k, c in compiled.items()},
            "ort_runs_per_call": {k: ort_runs_per_call(c, inputs) for k, c in compiled.items()},
            "call": side_by_side(compiled, inputs, rounds)}


def measure(name: str, n: int, rounds: int) -> dict:
    """The guards' cost alone and per call: three checks against ``CallGuard``."""
    model, example, inputs = _zoo(name, n)
    compiled = dycl.compile(model, example, check=False)
    new, old = compiled._call_guard, _ThreeChecks(compiled)

    def with_guard(guard):
        def call(*args):
            compiled._call_guard = guard
            return compiled(*args)
        return call

    guards = side_by_side({"three checks": lambda: old.check(), "CallGuard": lambda: new.check()},
                           [()] * 200, rounds)
    calls = side_by_side({"three checks": with_guard(old), "CallGuard": with_guard(new)}, inputs, rounds)
    compiled._call_guard = new
    return {"model": name, "lever": "guards", "ort_runs_per_call": ort_runs_per_call(compiled, inputs),
            "guard": guards, "call": calls}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="sdn_mobilenet,skipnet_rnn,sdn_resnet56")
    parser.add_argument("-n", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--lever", default="guards,threads,renames")
    args = parser.parse_args()
    levers = {"guards": measure, "threads": measure_threads, "renames": measure_renames}
    for lever in args.lever.split(","):
        for name in args.models.split(","):
            print(json.dumps(levers[lever](name, args.n, args.rounds)), flush=True)


if __name__ == "__main__":
    main()
