"""Two ONNX Runtime session levers of the host runtime (issue 29), each against the host without it.

    python benchmarks/session_levers.py [--models sdn_mobilenet,sdn_resnet56,skipnet_rnn] [-n 20]
                                        [--rounds 5] [--batch 1] [--compile] [--pools]

Contenders, all loaded from one saved artifact per model: ``symbolic`` (``DYCL_ORT_SPECIALIZE=off``:
every session at the exported, symbolic sizes), ``specialized`` (the default: sessions specialized
to the sizes that recur, ``ort_runtime._SpecializingExecutable``) and ``spin in run``
(``DYCL_ORT_SPIN=run``, specialization off: pool threads spin while a run lasts and stop when it
returns). Printed per model, one JSON line each:

- ``first_calls_ms``: a fresh ``specialized`` load called three times on one input: the first call
  (symbolic sessions), the second (which creates the specialized sessions of the path's sub-DNNs:
  ``created``) and the third (steady);
- ``blocks_ms`` / ``interleaved_ms``: median ms per call of each contender (``dycl.harness.timing``);
- ``eager_after_ms``: eager torch timed right after one call of each contender on the same input
  (and after nothing), rounds rotating the contenders: what a user's torch code next to dycl pays;
- ``compile_s`` (``--compile``): ``dycl.compile`` with specialization off and on (the self-check's
  repeated example calls create the example's specialized sessions during compile);
- ``session_runs_us``: the sum over the sub-DNNs the inputs reach of the median µs of one run on
  the symbolic session and on the specialized one, on the same feeds, the two taking turns 200
  times (what specialization changes in the runtime alone, without the rest of the call's noise).

``--batch B`` concatenates B samples per input (models taking one tensor). ``--pools`` compiles
with ``Levers(small_graphs_on_caller=False)``: every sub-DNN gets the pool (spinning acts on pools only).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from unittest import mock

import numpy as np
import torch
from dycl.hcfg.levers import Levers

import dycl
from dycl.harness import timing

sys.path.append(str(Path(__file__).resolve().parents[1]))  # the zoo (models/)

CONTENDERS = {"symbolic": {"DYCL_ORT_SPECIALIZE": "off"}, "specialized": {},
              "spin in run": {"DYCL_ORT_SPECIALIZE": "off", "DYCL_ORT_SPIN": "run"}}


def zoo_inputs(name: str, n: int, batch: int):
    zoo = importlib.import_module(f"models.{name}")
    model, example = zoo.build()
    model.eval()
    samples = [zoo.sample(s) for s in range(n * batch)]
    if batch > 1:
        samples = [torch.cat(samples[i * batch:(i + 1) * batch]) for i in range(n)]
    return model, example, [x if isinstance(x, tuple) else (x,) for x in samples]


def created(compiled: dycl.CompiledModel) -> int:
    """Specialized sessions created so far over the model's executables."""
    return sum(getattr(executable, "created", 0) for executable in executables(compiled))


def first_calls(artifact: Path, args: tuple) -> dict[str, float]:
    loaded = dycl.load(artifact)
    times = []
    with torch.no_grad():
        for _ in range(3):
            start = time.perf_counter()
            loaded(*args)
            times.append((time.perf_counter() - start) * 1000)
    return {"first": times[0], "second": times[1], "third": times[2], "created": created(loaded)}


def executables(compiled: dycl.CompiledModel) -> list:
    found = []
    for variants in compiled._host._variants.values():
        for executable in variants.values():
            found += [link[2] for link in executable.chain] if hasattr(executable, "chain") else [executable]
    return found


def session_runs(artifact: Path, inputs: list, turns: int = 200) -> dict[str, float]:
    """Summed median µs of a run on each specialized executable's symbolic and specialized session."""
    loaded = dycl.load(artifact)
    specializing = [e for e in executables(loaded) if hasattr(e, "specialized")]
    if not specializing:
        return {}
    kind = type(specializing[0])
    real, fed = kind.__call__, {}

    def recording(self, *args):
        fed.setdefault(id(self), (self, args))
        return real(self, *args)

    kind.__call__ = recording
    try:
        with torch.no_grad():
            for args in inputs:
                loaded(*args), loaded(*args)
    finally:
        kind.__call__ = real
    sums = {"symbolic": 0.0, "specialized": 0.0}
    for executable, args in fed.values():
        feeds = {name: np.asarray(args[position], dtype=dtype) for position, name, dtype in executable.inputs}
        key = tuple(d for position, name, _, keyed in executable.feeds if keyed for d in feeds[name].shape)
        entry = executable.specialized.get(key)
        if entry is None:
            continue
        runs = {"symbolic": (executable._run, []), "specialized": (entry[0], [])}
        for turn in range(turns):
            for label in ("symbolic", "specialized") if turn % 2 else ("specialized", "symbolic"):
                run, times = runs[label]
                start = time.perf_counter_ns()
                run(executable.outputs, feeds, None)
                times.append(time.perf_counter_ns() - start)
        for label, (_, times) in runs.items():
            sums[label] += statistics.median(times) / 1e3
    return {label: round(value, 1) for label, value in sums.items()}


def eager_after(model, contenders: dict, inputs: list, rounds: int) -> dict[str, float]:
    """Median ms of eager right after one call of each contender (or nothing) on the same input."""
    neighbours = {"nothing": lambda *a: None, **contenders}
    times: dict[str, list[float]] = {key: [] for key in neighbours}
    keys = list(neighbours)
    with torch.no_grad():
        for turn in range(rounds):
            for key in keys[turn % len(keys):] + keys[:turn % len(keys)]:
                for args in inputs:
                    neighbours[key](*args)
                    start = time.perf_counter()
                    model(*args)
                    times[key].append((time.perf_counter() - start) * 1000)
    return {key: round(statistics.median(values), 3) for key, values in times.items()}


def measure(name: str, n: int, rounds: int, batch: int, compile_time: bool, pools: bool) -> dict:
    model, example, inputs = zoo_inputs(name, n, batch)
    result: dict = {"model": name, "batch": batch, "pools": pools}
    levers = Levers(small_graphs_on_caller=False) if pools else True
    if compile_time:
        result["compile_s"] = {}
        for label, values in (("symbolic", CONTENDERS["symbolic"]), ("specialized", {})):
            with mock.patch.dict(os.environ, values):
                start = time.perf_counter()
                dycl.compile(model, example)
                result["compile_s"][label] = round(time.perf_counter() - start, 2)
    with tempfile.TemporaryDirectory() as scratch:
        artifact = dycl.compile(model, example, optimize=levers).save(Path(scratch) / "net")
        result["first_calls_ms"] = {k: round(v, 3) for k, v in first_calls(artifact, inputs[0]).items()}
        result["session_runs_us"] = session_runs(artifact, inputs)
        contenders = {}
        for label, values in CONTENDERS.items():
            with mock.patch.dict(os.environ, values):
                contenders[label] = dycl.load(artifact)
        with torch.no_grad():  # every size twice: its specialized sessions exist before timing
            for loaded in contenders.values():
                for args in inputs:
                    loaded(*args), loaded(*args)
        blocks = timing.blocks(contenders, inputs, rounds=rounds, progress=False)
        interleaved = timing.interleaved(contenders, inputs, repeat=3, progress=False)
        result["blocks_ms"] = {k: round(v.median_ms, 4) for k, v in blocks.items()}
        result["interleaved_ms"] = {k: round(v.median_ms, 4) for k, v in interleaved.items()}
        result["eager_after_ms"] = eager_after(model, contenders, inputs, rounds)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="sdn_mobilenet,sdn_resnet56,skipnet_rnn")
    parser.add_argument("-n", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--compile", action="store_true", help="also time dycl.compile with specialization off/on")
    parser.add_argument("--pools", action="store_true", help="every sub-DNN on a pool (no graph on the caller)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    print(json.dumps({"machine": timing.machine(), "taken": timing.taken(), "load": os.getloadavg(),
                      "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY")}))
    for name in args.models.split(","):
        print(json.dumps(measure(name, args.n, args.rounds, args.batch, args.compile, args.pools)), flush=True)


if __name__ == "__main__":
    main()
