"""Why one if-converted run of a whole batch is slower than the static network (issue 29).

    python benchmarks/batch_predicated.py [--models sdn_mobilenet] [--size 32] [--rounds 30]

``batch.md`` shows sdn_mobilenet at batch 32 making one sub-DNN run per batch (all six early
exits if-converted, ``dycl.per_sample.predicate``) that takes longer than the static network on
the same batch. Here, for each SDN model of the zoo, the candidate causes are timed side by
side in one process, on one batch of ``--size`` samples, each contender called once per round,
the order reversed every other round (ms per batch: median and 10th-90th percentile over rounds):

- ``batched``: the ``per_sample=True`` compile (if-converted where it compiles so), as served;
- ``routed``: the same with if-conversion off (``Levers(predicate=False)``);
- ``converted``: the same with every condition if-converted that can be (``PREDICATE_MACS`` lifted:
  the count that keeps a larger network's exits routed, ``dycl.per_sample.predicable_onnx``);
- ``graph 1t`` / ``graph pool``: the batched compile's first sub-DNN graph on its own session,
  on the calling thread and in a pool of every CPU (for an if-converted model: its one graph);
- ``static 1t`` / ``static pool``: ``batch.py``'s static network (the trace of the longest path
  with a dynamic batch dim) on one thread and in a pool (``batch.py`` times the pool);
- ``exits 1t`` / ``exits pool``: the same network exporting every exit's logits
  (``SDN.all_outputs``): the work an early-exit network does for a sample that reaches the end.
  The trace of ``forward`` drops the internal classifiers (only Python's ``if`` reads them), so the
  static network computes none of them.

Writes ``benchmarks/batch_predicated.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path
from unittest import mock

import numpy as np
import onnxruntime as ort
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from batch import static_network  # noqa: E402
from dycl.hcfg.levers import Levers  # noqa: E402

import dycl  # noqa: E402
from dycl.backends.onnxruntime import session_options  # noqa: E402
from dycl.per_sample import predicable_onnx  # noqa: E402
from dycl.per_sample.testing import batch_of, paths_of  # noqa: E402

SDN_MODELS = ("sdn_mobilenet", "sdn_vgg19", "sdn_resnet56", "sdn_wrn32_4")


class AllExits(torch.nn.Module):
    """An SDN computing every exit's logits: what its trace keeps when every classifier is an output."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(self.model.all_outputs(x))


def _with_threads(session: ort.InferenceSession, threads: int) -> ort.InferenceSession:
    """A session of ``session``'s model with dycl's options and ``threads`` intra-op threads."""
    options = session_options()
    options.intra_op_num_threads = threads
    return ort.InferenceSession(session._model_bytes, options, providers=["CPUExecutionProvider"])


def contenders(name: str, size: int) -> tuple[dict, dict]:
    """{contender: callable} for ``name`` on one batch of ``size`` samples, and facts about the compile."""
    zoo = importlib.import_module(f"models.{name}")
    model, example = zoo.build()
    batched = dycl.compile(model, example, per_sample=True, progress=False)
    routed = dycl.compile(model, example, per_sample=True, progress=False, optimize=Levers(predicate=False))
    with mock.patch.object(predicable_onnx, "PREDICATE_MACS", float("inf")):
        converted = dycl.compile(model, example, per_sample=True, progress=False)
    candidates = [zoo.sample(seed) for seed in range(64)]
    paths = paths_of(model, candidates)
    longest = candidates[max(range(len(candidates)), key=lambda i: len(paths[i]))]
    static, names = static_network(model, longest)
    exits, exit_names = static_network(AllExits(model), longest)
    samples = [zoo.sample(10_000 + i) for i in range(size)]
    batch = batch_of(samples)
    images = batch[0].numpy()
    graph = batched._host._call[0]
    feeds = {port.name: images[:, None] for port in graph.session.get_inputs()}
    pool = os.cpu_count() or 1
    sessions = {"graph 1t": (_with_threads(graph.session, 1), feeds),
                "graph pool": (_with_threads(graph.session, pool), feeds),
                "static 1t": (_with_threads(static, 1), {names[0]: images}),
                "static pool": (static, {names[0]: images}),
                "exits 1t": (_with_threads(exits, 1), {exit_names[0]: images}),
                "exits pool": (exits, {exit_names[0]: images})}
    called = {"batched": lambda: batched(*batch), "routed": lambda: routed(*batch),
              "converted": lambda: converted(*batch)}
    called |= {label: (lambda s=s, f=f: s.run(None, f)) for label, (s, f) in sessions.items()}
    stats = batched.stats.get("per_sample", {})
    facts = {"predicated": stats.get("predicated_conditions", 0),
             "graph_threads": _threads(batched), "converted_threads": _threads(converted),
             "runs": len(batched._host.route(images)[1]), "routed_runs": len(routed._host.route(images)[1]),
             "converted": converted.stats.get("per_sample", {}).get("predicated_conditions", 0),
             "paths": len(set(paths_of(model, samples)))}
    return called, facts


def _threads(compiled) -> int:
    """The intra-op threads of a compile's first graph, as its thread choice set them."""
    return compiled._host._call[0].session.get_session_options().intra_op_num_threads


def timed(called: dict, rounds: int) -> dict[str, list[float]]:
    """ms per call of each contender, one call each per round, the order reversed every other round."""
    times: dict[str, list[float]] = {label: [] for label in called}
    order = list(called)
    with torch.no_grad():
        for function in called.values():  # warm-up: sessions allocate on their first run
            function()
        for turn in range(rounds):
            for label in order if turn % 2 == 0 else order[::-1]:
                start = time.perf_counter()
                called[label]()
                times[label].append((time.perf_counter() - start) * 1000.0)
    return times


def _cell(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({np.percentile(values, 10):.2f}-{np.percentile(values, 90):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(SDN_MODELS))
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "batch_predicated.md")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    rows = []
    for name in args.models.split(","):
        called, facts = contenders(name, args.size)
        rows.append((name, facts, timed(called, args.rounds)))
        print(f"{name}: done", file=sys.stderr, flush=True)
    labels = list(rows[0][2])
    lines = ["# One if-converted run against the static network (issue 29)", "",
             f"Command: `python benchmarks/batch_predicated.py --models {args.models} --size {args.size} "
             f"--rounds {args.rounds}`",
             f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, ONNX Runtime {ort.__version__}, torch "
             f"{torch.get_num_threads()} intra-op threads; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
             f"load average {os.getloadavg()[0]:.1f} at the end.", "",
             "ms per batch, median (10th-90th percentile) over rounds, every contender once per round, the "
             "order reversed every other round (see the script's docstring). *pred*: conditions if-converted in "
             "*batched* / *converted*; *runs*: sub-DNN runs of the batched / routed compile on the batch; "
             "*t*: intra-op threads of the first graph of the batched / converted compile, as its thread choice "
             "set them (two compiles of one model time that choice apart).", "",
             "| model | pred | runs | t | " + " | ".join(labels) + " |", "|---" * (len(labels) + 4) + "|"]
    for name, facts, times in rows:
        lines.append(f"| {name} | {facts['predicated']} / {facts['converted']} | {facts['runs']} / "
                     f"{facts['routed_runs']} | {facts['graph_threads']} / {facts['converted_threads']} | "
                     + " | ".join(_cell(times[label]) for label in labels) + " |")
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
