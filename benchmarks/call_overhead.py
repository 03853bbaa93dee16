"""The fixed cost of one call and of each sub-DNN run (issue 29), as a breakdown and side by side.

    python benchmarks/call_overhead.py [--models sdn_mobilenet,ranet,skipnet_rnn] [-n 20] [--rounds 9]
                                       [--baseline DIR] [--profile]

``breakdown``: one in-process call cut with ``perf_counter_ns`` into the staleness guard, the
argument conversion (torch -> numpy), the host's binding and input checks, the ONNX Runtime runs,
the rest of the host (conditions, bookkeeping) and the output packing (numpy -> torch). Each run is
split three ways (``_Clock``): the runtime's C call repeated at once on the same feeds (its warm
floor), the Python around it (the call with the runtime stubbed out), and the rest (coming to this
session after another: cold caches, a pool to wake). Medians over the inputs, in µs per call.

``--baseline DIR``: a checkout of another tree (``git archive REV | tar -x -C DIR``); its
``host.py`` of each model (with that tree's copied host and ONNX Runtime runtime) is written by
a subprocess there and loaded here beside this tree's; the two hosts take turns, round by round,
on the same numpy inputs (each round: every input 3 times, best kept; the order alternating per
round), and so do the in-process calls on tensors (``_BaselineCall``: the api's call steps as they
were). Printed: median and spread (min-max) of the rounds' per-call medians, µs. ``--profile``
adds a cProfile of 10 passes over the inputs (the top 15 by own time). JSON lines on stdout.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import io
import json
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils import _pytree as pytree

import dycl
from dycl.api import _host_arguments, _to_torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # the zoo (models/)
sys.path.append(str(ROOT / "benchmarks"))  # its sibling script, when this one is imported
import boundary_levers  # noqa: E402 - after the path it is found on

_SAVE = ("import sys; sys.path.insert(0, {root!r}); import importlib, dycl; "
         "m = importlib.import_module('models.{name}'); model, example = m.build(); model.eval(); "
         "dycl.compile(model, example).save({out!r})")


def _zoo(name: str, n: int):
    zoo = importlib.import_module(f"models.{name}")
    model, example = zoo.build()
    model.eval()
    return model, example, [x if isinstance(x, tuple) else (x,) for x in (zoo.sample(s) for s in range(n))]


class _Clock:
    """Times every executable call of a host three ways: the call itself; the runtime's C call alone,
    repeated at once on the same feeds (the run's floor: warm caches, a pool just used); and the call
    with the runtime stubbed out (the Python around it). What the call costs beyond both is the price
    of coming to this session after another (cold caches, a pool to wake)."""

    def __init__(self, host) -> None:
        self.host, self.runs, self.run_ns, self.c_ns, self.python_ns = host, 0, 0, 0, 0
        self.saved = host._variants, host._call
        host._variants = {i: {k: self._timed(e) for k, e in v.items()} for i, v in host._variants.items()}
        host._call = {i: next(iter(v.values())) for i, v in host._variants.items() if len(v) == 1}

    def _timed(self, executable):
        def call(*args):
            ns = time.perf_counter_ns
            start = ns()
            outputs = executable(*args)
            self.run_ns += ns() - start
            self.runs += 1
            feeds = {name: args[position] for position, name, _ in executable.inputs}
            start = ns()
            executable.session._sess.run(executable.outputs, feeds, None)
            self.c_ns += ns() - start
            stubbed = _stubbed(executable, lambda names, feeds, options: outputs)
            start = ns()
            executable(*args)
            self.python_ns += ns() - start
            stubbed()
            return outputs
        return call

    def restore(self) -> None:
        self.host._variants, self.host._call = self.saved


def _stubbed(executable, stub):
    """Every runner of ``executable`` replaced by ``stub`` (its symbolic session's, and those of its
    sessions specialized to sizes: ``ort_runtime._SpecializingExecutable``); returns the undo."""
    names = ("_run", "symbolic", "specialized")
    saved = {name: getattr(executable, name) for name in names if hasattr(executable, name)}
    executable._run = stub
    if "symbolic" in saved:
        executable.symbolic = [stub, False]
        executable.specialized = {key: [stub, False] for key in saved["specialized"]}

    def undo() -> None:
        for name, value in saved.items():
            setattr(executable, name, value)
    return undo


def _one_call(compiled: dycl.CompiledModel, clock: _Clock, args: tuple) -> dict[str, float]:
    """One call, the api's steps one by one (``CompiledModel.__call__`` without module state)."""
    host, ns = compiled._host, time.perf_counter_ns
    before = (clock.run_ns, clock.c_ns, clock.python_ns, clock.runs)
    t0 = ns()
    compiled._call_guard.check()
    t1 = ns()
    numpy_args, kwargs = _host_arguments(args, {})
    t2 = ns()
    arguments = _bound(host, numpy_args)
    t3 = ns()
    raw = host._forward(**arguments)
    t4 = ns()
    _to_torch(raw, host.manifest.per_sample)
    t5 = ns()
    run_ns, c_ns, python_ns = (now - then for now, then in zip((clock.run_ns, clock.c_ns, clock.python_ns), before))
    clocks = c_ns + python_ns  # spent on the clock's own extra calls, inside host._forward
    return {"total": (t5 - t0 - clocks) / 1e3, "guard": (t1 - t0) / 1e3, "to_numpy": (t2 - t1) / 1e3,
            "bind_and_check": (t3 - t2) / 1e3, "runs": clock.runs - before[3], "run_c_warm": c_ns / 1e3,
            "run_python": python_ns / 1e3, "run_switch": (run_ns - c_ns - python_ns) / 1e3,
            "host_rest": (t4 - t3 - run_ns - clocks) / 1e3, "to_torch": (t5 - t4) / 1e3}


def _bound(host, numpy_args: tuple) -> dict:
    """The host's arguments, bound and checked as ``HostModel._run`` does."""
    namespace = type(host)._forward.__globals__  # the host module's
    arguments = namespace["_bind"](numpy_args, {})
    dims: dict = {}
    for spec in host._inputs:
        namespace["_check_input"](spec, arguments[spec.name], dims)
    return arguments


def breakdown(compiled: dycl.CompiledModel, inputs, repeat: int = 5) -> dict[str, float]:
    """Median over ``inputs`` of each step's µs in one call (the best of ``repeat`` by total)."""
    clock = _Clock(compiled._host)
    try:
        for args in inputs:
            compiled(*args)
        rows = [min((_one_call(compiled, clock, args) for _ in range(repeat)), key=lambda r: r["total"])
                for args in inputs]
    finally:
        clock.restore()
    return {key: round(statistics.median(row[key] for row in rows), 2) for key in rows[0]}


def profile(compiled: dycl.CompiledModel, inputs) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(10):
        for args in inputs:
            compiled(*args)
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(15)
    return text.getvalue()


def side_by_side(settings: dict[str, object], inputs, rounds: int) -> dict[str, dict[str, float]]:
    """``boundary_levers.side_by_side`` (settings alternating round by round), to 0.1 µs."""
    return {name: {key: round(value, 1) for key, value in row.items()}
            for name, row in boundary_levers.side_by_side(settings, inputs, rounds).items()}


class _BaselineCall:
    """The in-process call as ``CompiledModel.__call__`` made it before issue 29's per-call work (c0c3e38),
    around ``host`` (the baseline tree's ``host.py``): the same guard, arguments converted after a
    per-tensor device check, every output not owned by its array copied, the outputs rebuilt by pytree."""

    def __init__(self, compiled: dycl.CompiledModel, host) -> None:
        self.guard, self.host, self.spec = compiled._call_guard, host, compiled._result.output_spec

    def __call__(self, *args):
        self.guard.check()
        assert all(type(a) is torch.Tensor and not a.requires_grad and a.device.type == "cpu" for a in args)
        raw = self.host(*tuple(a.numpy() for a in args))
        outputs = pytree.tree_map(_copied_unless_owned, raw)
        return outputs if self.spec is None else pytree.tree_unflatten(pytree.tree_leaves(outputs), self.spec)


def _copied_unless_owned(value):
    if not isinstance(value, np.ndarray):
        return value
    owned = value.flags.owndata and value.flags.writeable
    return torch.from_numpy(value if owned else np.array(value, copy=True))


def against_baseline(name: str, compiled: dycl.CompiledModel, inputs, baseline: Path, rounds: int) -> dict:
    """This tree against ``baseline``: the saved hosts on numpy inputs, and the in-process calls on
    tensors (this tree's ``CompiledModel`` against ``_BaselineCall`` around the baseline's host)."""
    with tempfile.TemporaryDirectory() as scratch:
        base_dir, this_dir = Path(scratch) / "base", Path(scratch) / "this"
        code = _SAVE.format(root=str(baseline), name=name, out=str(base_dir))
        subprocess.run([sys.executable, "-c", code], cwd=baseline, check=True, capture_output=True,
                       env={"PYTHONPATH": str(baseline), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
        compiled.save(this_dir)
        hosts = {"baseline": dycl.load(base_dir), "this": dycl.load(this_dir)}
        numpy_inputs = [tuple(a.numpy() for a in args) for args in inputs]
        host = side_by_side({key: loaded.run_numpy for key, loaded in hosts.items()}, numpy_inputs, rounds)
        in_process = side_by_side({"baseline": _BaselineCall(compiled, hosts["baseline"]._host),
                                   "this": compiled}, inputs, rounds)
    return {"host": host, "in_process": in_process}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="sdn_mobilenet,ranet,skipnet_rnn")
    parser.add_argument("-n", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--baseline", type=Path)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    for name in args.models.split(","):
        model, example, inputs = _zoo(name, args.n)
        compiled = dycl.compile(model, example)
        row = {"model": name, "breakdown_us": breakdown(compiled, inputs)}
        if args.baseline is not None:
            row["per_call_us"] = against_baseline(name, compiled, inputs, args.baseline, args.rounds)
        print(json.dumps(row), flush=True)
        if args.profile:
            print(profile(compiled, inputs), flush=True)


if __name__ == "__main__":
    main()
