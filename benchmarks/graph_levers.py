"""Where dycl's one graph spends its time against the path's own graph, and ONNX Runtime session
levers on it, each A/B in one process with outputs compared bit for bit (issue 29).

    python benchmarks/graph_levers.py [--models caption_googlenet,sdn_wrn32_4] [-n 10] [--turns 30] [--profile]
                                      [--levers "no CPU arena,no memory pattern"]

For each zoo model: dycl's one graph (``Levers(single_graph="on")``, the file its artifact holds) and
*oracle + decisions* for the example's path (``torch.onnx.export`` of the path, also returning every
tensor Python read: ``dycl.harness.consistency.traced_baseline(decisions=True)``), both run on the
calling thread (one intra-op thread, as ``"auto"`` keeps the one graph on this zoo).

- ``--profile``: ONNX Runtime's profiler (``SessionOptions.enable_profiling``) on the example,
  ``--turns`` runs each: the µs per run of each operator type summed over its nodes, the nodes
  run (in all and per operator type), for both graphs; what the one graph's NaN/infinity repairs,
  clamps and decisions cost shows as the operator types the oracle does not run.
- levers: sessions of the one graph made with one setting changed from dycl's
  (``dycl.backends.ort_runtime.session_options_for``, one thread), run in turns with the
  baseline on the zoo's inputs ``--turns`` times; printed: the median over turns of each session's
  summed µs over the inputs, the ratio to the baseline, and whether every output of every input
  equals the baseline's bit for bit (a lever that changes a bit is never adopted).
"""

from __future__ import annotations

import argparse
import collections
import importlib
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch
from dycl.hcfg.levers import Levers

import dycl
from dycl.backends import ort_runtime
from dycl.harness.timing import machine

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # the zoo (models/)


def _options(**changes) -> ort.SessionOptions:
    options = ort_runtime.session_options_for(ort_runtime.runtime_options(threads=1, specialize=False))
    for key, value in changes.items():
        if key == "config":
            for entry, setting in value.items():
                options.add_session_config_entry(entry, setting)
        else:
            setattr(options, key, value)
    return options


LEVERS = {
    "baseline": {},
    "optimization EXTENDED": {"graph_optimization_level": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED},
    "no memory pattern": {"enable_mem_pattern": False},
    "no CPU arena": {"enable_cpu_mem_arena": False},
    "2 intra-op threads": {"intra_op_num_threads": 2},
    "parallel execution": {"execution_mode": ort.ExecutionMode.ORT_PARALLEL, "inter_op_num_threads": 2},
    "no prepacking": {"config": {"session.disable_prepacking": "1"}},
}


def one_graph(model, example) -> bytes:
    compiled = dycl.compile(model, example, optimize=Levers(single_graph="on"))
    if compiled.stats["single_graph"].get("chosen") != "single_graph":
        raise SystemExit(f"not lowered: {compiled.stats['single_graph'].get('reason')}")
    with tempfile.TemporaryDirectory() as scratch:
        path = compiled.save(Path(scratch) / "artifact")
        return (Path(path) / "single_graph.onnx").read_bytes()


def oracle_decisions(model, example: tuple) -> bytes:
    from dycl.harness.consistency import path_graph

    return path_graph(model, example, decisions=True)


def _feeds(session: ort.InferenceSession, args: tuple) -> dict:
    return {i.name: a.numpy() for i, a in zip(session.get_inputs(), args)}


def profile(data: bytes, args: tuple, turns: int) -> dict:
    """µs per run of each operator type (summed over nodes) and the nodes run per call."""
    with tempfile.TemporaryDirectory() as scratch:
        options = _options(enable_profiling=True, profile_file_prefix=os.path.join(scratch, "p"))
        session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        feeds = _feeds(session, args)
        for _ in range(5):
            session.run(None, feeds)
        events = json.loads(Path(session.end_profiling()).read_text())
        session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        for _ in range(turns):
            session.run(None, feeds)
        events = json.loads(Path(session.end_profiling()).read_text())
    kernels = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    by_op: collections.Counter = collections.Counter()
    for event in kernels:
        by_op[event["args"]["op_name"]] += event["dur"]
    nodes = collections.Counter(event["args"]["op_name"] for event in kernels)
    runs = [e["dur"] for e in events if e.get("name") == "model_run"]
    return {"run_us": statistics.median(runs[5:] or runs), "nodes_per_run": len(kernels) / (turns + 5),
            "by_op_us": {op: round(us / (turns + 5), 1) for op, us in by_op.most_common()},
            "nodes_by_op": {op: round(count / (turns + 5), 1) for op, count in nodes.most_common()}}


def levers(data: bytes, inputs: list[tuple], turns: int, chosen: list[str]) -> dict:
    sessions = {name: ort.InferenceSession(data, _options(**LEVERS[name]), providers=["CPUExecutionProvider"])
                for name in ["baseline", *chosen]}
    feeds = [_feeds(sessions["baseline"], args) for args in inputs]
    reference = [sessions["baseline"].run(None, feed) for feed in feeds]
    same = {name: all(all(np.array_equal(a, b, equal_nan=True) and a.dtype == b.dtype for a, b in zip(out, ref))
                      for out, ref in zip((session.run(None, feed) for feed in feeds), reference))
            for name, session in sessions.items()}
    totals: dict[str, list[float]] = {name: [] for name in sessions}
    names = list(sessions)
    for turn in range(turns):
        for name in (names if turn % 2 == 0 else reversed(names)):
            session = sessions[name]
            session.run(None, feeds[0])  # lead-in
            start = time.perf_counter()
            for feed in feeds:
                session.run(None, feed)
            totals[name].append((time.perf_counter() - start) / len(feeds) * 1e6)
    base = statistics.median(totals["baseline"])
    return {name: {"us": round(statistics.median(t), 1), "ratio": round(statistics.median(t) / base, 3),
                   "same_bits": same[name]} for name, t in totals.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="caption_googlenet,sdn_wrn32_4")
    parser.add_argument("-n", type=int, default=10)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--levers", default=",".join(list(LEVERS)[1:]), help="of: " + ", ".join(list(LEVERS)[1:]))
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    print(f"{machine()}; load average {os.getloadavg()[0]:.1f}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    for name in args.models.split(","):
        zoo = importlib.import_module(f"models.{name}")
        model, example = zoo.build()
        example = example if isinstance(example, tuple) else (example,)
        inputs = [x if isinstance(x, tuple) else (x,) for x in (zoo.sample(s) for s in range(args.n))]
        data = one_graph(model, example)
        row: dict = {"name": name}
        if args.profile:
            with torch.no_grad():
                oracle = oracle_decisions(model, example)
            row["one_graph"] = profile(data, example, args.turns)
            row["oracle_decisions"] = profile(oracle, example, args.turns)
        else:
            row["levers"] = levers(data, inputs, args.turns, args.levers.split(","))
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
