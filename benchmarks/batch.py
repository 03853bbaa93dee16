"""Per-sample batched serving (issue 19): throughput and latency per batch size, side by side in one run.

    python benchmarks/batch.py [--models sdn_vgg19,skipnet_ff] [--sizes 1,8,32,128] [--batches 5] [--out DIR]

For each zoo model and batch size B, on the same batches of B samples (seeds
differ per batch), the contenders take turns on each batch, each calling it ``BLOCK``
times back to back (its median is the batch's time; ``timed_in_blocks``), the turn
order rotating from batch to batch:

- ``eager_1``: eager PyTorch, one sample at a time (the batch's latency is the sum);
- ``dycl_1``: dycl (ONNX Runtime, default compile), one sample at a time;
- ``dycl_batched``: ``dycl.compile(..., per_sample=True)``, the whole batch in one call;
- ``dycl_routed``: the same with if-conversion off (``optimize=Levers(predicate=False)``): every
  condition routes the samples (``dycl.per_sample.predicate`` says what if-conversion does);
- ``static``: the *static* whole network on ONNX Runtime at batch B, every branch
  taken (no early exit, no skipped block), exported with a dynamic batch dim — what a
  user runs today to batch. Its outputs are not per-sample eager's (that is the point).
  Where the zoo module defines ``every_branch(model)`` (the gated ResNets: SkipNet's
  gates and BlockDrop's policy computed, every block run), its trace; elsewhere the
  eager trace of the sample with the longest path among the candidates (an SDN's
  sample that exits at no head, a decoder's longest sentence). Before 2026-11-28 the
  gated ResNets took the longest path too, which skipped blocks no candidate ran
  (12 of SkipNet-FF's 17 gated blocks, 37 of BlockDrop's 54 ran), so their static
  network did less work than the whole network.
  Timed twice, on the calling thread and with the pool every dycl session gets by default
  (``static_1t``, ``static_pool``, taking turns with the rest); ``static`` is the faster of the
  two at each size (dycl's own graphs get that choice too: ``dycl.backends.thread_choice``).

Reported per contender: samples/s over all batches, p50/p99 latency per batch
(ms), and for ``dycl_batched`` how the batch split (sub-DNN runs per batch and
mean group size) and mismatches against eager per sample (float outputs within
1e-4): ``flip`` counts batches that differ from eager but equal either the
default compile one sample at a time, or eager with every sample whose float32
answer is decided by rounding answered in float64 (``rounding_answers``): a
discrete decision (an ``argmax`` or a threshold) whose margin is within float32
rounding, which ONNX Runtime's kernels (and a batch's other summation order) may
break otherwise than eager (measured: caption_googlenet, seed 10020, its first
word's two best scores differ by 2.4e-7 = 1 ulp; float32 eager goes on for 10
words, float64 eager stops at once, and so does the batch of 8 it is in, while
dycl one sample at a time agrees with float32 eager). Such a flip is the ordinary
compiled-vs-eager tolerance, not a batching error, so it is reported, not hidden;
``bad`` counts the other differing batches (must be 0: the per-sample mode got
something wrong). Every path is run once before timing (sessions are created
lazily), and the first batch of each size is a warm-up, not timed.

*Where the time goes* (``time_split``): on the last batch of each size, the batched host is
called again a few times with every sub-DNN wrapped in a timer, which splits its time into
the runtime's runs (``runtime``: ONNX Runtime's ``run`` and the feed conversion, summed over
the sub-DNN runs) and the rest (``router``: the per-sample generators, gathers, rows and
joins of ``hostgen/host_router.py``), beside the static network's time on the same batch.
Writes ``DIR/batch.md`` and ``DIR/batch.json`` (default: this folder).
Do not run the full configuration on a shared machine.
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import math
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dycl.hcfg.levers import Levers  # noqa: E402

import dycl  # noqa: E402
from dycl.harness.conditioning import float64_answer  # noqa: E402
from dycl.harness.testing import outputs_match  # noqa: E402
from dycl.per_sample.semantics import join  # noqa: E402
from dycl.per_sample.testing import PerSampleEager, batch_of, paths_of  # noqa: E402
from models import ZOO  # noqa: E402

CONTENDERS = ("eager_1", "dycl_1", "dycl_batched", "dycl_routed", "static_1t", "static_pool")


def _args(sample):
    return sample if isinstance(sample, tuple) else (sample,)


def static_network(model: torch.nn.Module, sample, threads: int | None = None) -> tuple:
    """(ORT session, input names) of ``model``'s trace on ``sample`` with a dynamic batch dim;
    ``threads``: its intra-op threads (None: the pool dycl's sessions get by default)."""
    import onnxruntime as ort

    from dycl.backends.onnxruntime import session_options

    class Flat(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *args):
            out = self.model(*args)
            return tuple(t for t in (out if isinstance(out, tuple) else (out,)) if isinstance(t, torch.Tensor))

    args = _args(sample)
    names = [f"input_{i}" for i in range(len(args))]
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Flat().eval(), args, buffer, dynamo=False, opset_version=17, input_names=names,
                          dynamic_axes={name: {0: "batch"} for name in names})
    # dycl's session options (no spinning): a spinning pool would slow the contender that runs next
    options = session_options()
    if threads is not None:
        options.intra_op_num_threads = threads
    return ort.InferenceSession(buffer.getvalue(), options, providers=["CPUExecutionProvider"]), names


class _Timed:
    """A sub-DNN callable that adds the seconds of each call to ``spent``."""

    def __init__(self, callee, spent: list[float]) -> None:
        self.callee, self.spent = callee, spent

    def __call__(self, *args):
        start = time.perf_counter()
        try:
            return self.callee(*args)
        finally:
            self.spent.append(time.perf_counter() - start)


def time_split(host, numpy_batch: list, static, feeds: dict, repeats: int = 5) -> dict:
    """Median ms of one batched host call, of its sub-DNN runs (``runtime``) and of the rest
    (``router``), and of the static network on the same batch, calls alternating."""
    spent: list[float] = []
    saved = (dict(host._call), {index: dict(variants) for index, variants in host._variants.items()})
    host._call = {index: _Timed(callee, spent) for index, callee in saved[0].items()}
    host._variants = {index: {key: _Timed(callee, spent) for key, callee in variants.items()}
                      for index, variants in saved[1].items()}
    totals, runtimes, statics = [], [], []
    try:
        for _ in range(repeats):
            spent.clear()
            totals.append(_timed(lambda: host(*numpy_batch)))
            runtimes.append(sum(spent) * 1000.0)
            statics.append(_timed(lambda: static.run(None, feeds)))
    finally:
        host._call, host._variants = saved
    total, runtime = statistics.median(totals), statistics.median(runtimes)
    return {"total_ms": total, "runtime_ms": runtime, "router_ms": total - runtime,
            "static_ms": statistics.median(statics)}


def rounding_answers(model: torch.nn.Module, single, samples: list) -> list:
    """The joined answers a batch may give where eager's own decisions are within float32
    rounding: dycl's default compile one sample at a time, and eager with each sample whose
    float32 answer differs from its float64 one answered in float64 (``dycl.harness.conditioning``)."""
    with torch.no_grad():
        eager = [model(*_args(sample)) for sample in samples]
        rounded = []
        for sample, answer in zip(samples, eager):
            wide = float64_answer(model, _args(sample), {})
            decided = wide is not None and outputs_match(answer, wide, 1e-4) is not None
            rounded.append(wide if decided else answer)
        return [join([single(*_args(sample)) for sample in samples]), join(rounded)]


#: each contender's calls of one batch, back to back (``timed_in_blocks``)
BLOCK = 3


def timed_in_blocks(calls: dict, first: int) -> dict[str, float]:
    """Each contender's median ms over ``BLOCK`` calls back to back, as a server calls one
    model; the contenders take turns, starting with the one at ``first`` (mod their number),
    so that none always runs right after eager torch (whose spinning OpenMP workers slow
    the next contender's first call: measured 13.0 against 9.5 ms for sdn_resnet56's batch
    of 32) or after the same contender."""
    names = list(calls)
    order = names[first % len(names):] + names[:first % len(names)]
    return {name: statistics.median(_timed(calls[name]) for _ in range(BLOCK)) for name in order}


def _timed(function) -> float:
    start = time.perf_counter()
    function()
    return (time.perf_counter() - start) * 1000.0


def bench_model(name: str, sizes: list[int], batches: int) -> dict:
    zoo = importlib.import_module(f"models.{name}")
    model, example = zoo.build()
    row: dict = {"name": name, "sizes": {}}
    start = time.perf_counter()
    batched = dycl.compile(model, example, per_sample=True, progress=False)
    row["compile_per_sample_s"] = time.perf_counter() - start
    row["per_sample"] = batched.stats.get("per_sample", {})
    routed = dycl.compile(model, example, per_sample=True, progress=False, optimize=Levers(predicate=False))
    single = dycl.compile(model, example, progress=False)
    candidates = [zoo.sample(seed) for seed in range(64)]
    paths = paths_of(model, candidates)
    longest = max(range(len(candidates)), key=lambda i: len(paths[i]))
    whole = zoo.every_branch(model) if hasattr(zoo, "every_branch") else model
    row["static_network"] = "every_branch" if whole is not model else "longest path"
    static_pool, static_names = static_network(whole, candidates[longest])
    static_1t, _ = static_network(whole, candidates[longest], threads=1)
    reference = PerSampleEager(model)
    with torch.no_grad():  # every path once: sessions are created lazily, on a branch's first call
        batched(*batch_of(candidates))
        routed(*batch_of(candidates))
        for sample in candidates:
            single(*_args(sample))
    for size in sizes:
        times = {contender: [] for contender in CONTENDERS}
        runs, groups_mean, batch_paths, mismatches, flips = [], [], [], 0, 0
        for index in range(batches + 1):  # batch 0 warms up
            samples = [zoo.sample(10_000 + index * size + i) for i in range(size)]
            batch = batch_of(samples)
            numpy_batch = [a.numpy() if isinstance(a, torch.Tensor) else a for a in batch]
            feeds = dict(zip(static_names, numpy_batch))
            calls = {
                "eager_1": lambda samples=samples: [model(*_args(s)) for s in samples],
                "dycl_1": lambda samples=samples: [single(*_args(s)) for s in samples],
                "dycl_batched": lambda batch=batch: batched(*batch),
                "dycl_routed": lambda batch=batch: routed(*batch),
                "static_1t": lambda feeds=feeds: static_1t.run(None, feeds),
                "static_pool": lambda feeds=feeds: static_pool.run(None, feeds),
            }
            with torch.no_grad():
                measured = timed_in_blocks(calls, first=index)
            if index == 0:
                continue
            for contender, ms in measured.items():
                times[contender].append(ms)
            _, groups = batched._host.route(*numpy_batch)
            runs.append(len(groups))
            groups_mean.append(statistics.fmean(size_ for _, size_ in groups))
            batch_paths.append(len(set(paths_of(model, samples))))
            with torch.no_grad():
                expected = reference(*batch)
                for got in (batched(*batch), routed(*batch)):
                    if outputs_match(expected, got, 1e-4) is not None:
                        flip = any(outputs_match(accepted, got, 1e-4) is None
                                   for accepted in rounding_answers(model, single, samples))
                        flips += flip
                        mismatches += not flip
        faster = min(("static_1t", "static_pool"), key=lambda contender: sum(times[contender]))
        times["static"] = times[faster]
        static = static_1t if faster == "static_1t" else static_pool
        row["sizes"][str(size)] = {
            contender: {"samples_per_s": size * len(ms) / (sum(ms) / 1000.0), "p50_ms": _percentile(ms, 50),
                        "p99_ms": _percentile(ms, 99)}
            for contender, ms in times.items()}
        row["sizes"][str(size)]["static_threads"] = (
            1 if faster == "static_1t" else static_pool.get_session_options().intra_op_num_threads)
        row["sizes"][str(size)]["time_split"] = time_split(batched._host, numpy_batch, static, feeds)
        row["sizes"][str(size)]["split"] = {"sub_dnn_runs": statistics.fmean(runs),
                                            "mean_group": statistics.fmean(groups_mean),
                                            "paths_in_batch": statistics.fmean(batch_paths),
                                            "mismatched_batches": mismatches, "float_flip_batches": flips}
    return row


def _predicated(row: dict) -> str:
    counts = row.get("per_sample", {})
    total = counts.get("predicated_conditions", 0) + counts.get("routed_conditions", 0)
    return f"{counts.get('predicated_conditions', 0)}/{total}" if counts else "-"


def _time_split(sizes_row: dict) -> str:
    found = sizes_row.get("time_split")
    return f"{found['runtime_ms']:.1f} / {found['router_ms']:.1f} / {found['static_ms']:.1f}" if found else "-"


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def geomean(values) -> float | None:
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def write_results(rows: list[dict], args, out: Path) -> None:
    sizes = [str(s) for s in args.sizes]
    lines = [
        "# Per-sample batched serving (issues 19, 29)", "",
        f"Command: `python benchmarks/batch.py --sizes {','.join(sizes)} --batches {args.batches}"
        + (f" --models {args.models}" if args.models else "") + "`",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__} with "
        f"{torch.get_num_threads()} intra-op threads; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"load average {os.getloadavg()[0]:.1f} at the end.", "",
        f"Throughput in samples/s over all timed batches; latency per batch p50/p99 in ms; a batch's time is "
        f"the median of {BLOCK} calls back to back, the contenders taking turns in an order that rotates from "
        "batch to batch. *eager 1* and "
        "*dycl 1*: one sample at a time; *batched*: `per_sample=True`, one call per batch; *routed*: the same with "
        "if-conversion off (`optimize=Levers(predicate=False)`), with *pred* of the model's conditions if-converted "
        "in *batched*; *static*: the whole "
        "network (every branch taken: the zoo module's `every_branch` where it has one, marked *, else the "
        "longest path among 64 samples) on ONNX Runtime at the batch size, on the calling thread (1t) "
        "or with the pool, whichever was faster at that size (both timed in turns with the rest). "
        "*split*: sub-DNN runs per "
        "batch / mean group size / distinct eager paths in the batch (of *batched*); *bad*: batches whose outputs "
        "(batched or routed) differ from eager per sample, from dycl one sample at a time and from eager answering "
        "in float64 the samples float32 rounding decides (must be 0); *flip*: batches that differ from eager but "
        "equal one of those (a decision within float32 rounding; "
        "see the script's docstring). *runtime / router / static ms*: one batched call of the last batch split into "
        "its sub-DNN runs and the rest (the router), beside the static network on that batch (median of 5, "
        "alternating; see the script's docstring).", "",
        "| model | pred | B | eager 1 | dycl 1 | batched | routed | static | batched p50/p99 | static p50/p99 | split "
        "| runtime / router / static ms | bad | flip |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        for size in sizes:
            r = row["sizes"][size]
            split = r["split"]
            lines.append(
                f"| {row['name']} | {_predicated(row)} | {size} | "
                + " | ".join(f"{r[c]['samples_per_s']:.0f}" for c in CONTENDERS[:4])
                + f" | {r['static']['samples_per_s']:.0f} ({r.get('static_threads', '?')}t)"
                + ("*" if row.get("static_network") == "every_branch" else "")
                + f" | {r['dycl_batched']['p50_ms']:.1f}/{r['dycl_batched']['p99_ms']:.1f}"
                f" | {r['static']['p50_ms']:.1f}/{r['static']['p99_ms']:.1f}"
                f" | {split['sub_dnn_runs']:.0f} / {split['mean_group']:.1f} / {split['paths_in_batch']:.1f}"
                f" | {_time_split(r)}"
                f" | {split['mismatched_batches']} | {split.get('float_flip_batches', 0)} |")
    lines += ["", "Geometric mean over models of batched throughput divided by each contender's:", "",
              "| B | / eager 1 | / dycl 1 | / routed | / static | routed / static |", "|---|---|---|---|---|---|"]
    for size in sizes:
        ratios = [geomean(row["sizes"][size][a]["samples_per_s"] / row["sizes"][size][c]["samples_per_s"]
                          for row in rows)
                  for a, c in [("dycl_batched", "eager_1"), ("dycl_batched", "dycl_1"), ("dycl_batched", "dycl_routed"),
                               ("dycl_batched", "static"), ("dycl_routed", "static")]]
        lines.append(f"| {size} | " + " | ".join(f"{v:.2f}x" for v in ratios) + " |")
    (out / "batch.md").write_text("\n".join(lines) + "\n")
    (out / "batch.json").write_text(json.dumps({"rows": rows, "command": vars(args) | {"out": str(args.out)}},
                                               indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help="comma-separated zoo names (default: all)")
    parser.add_argument("--sizes", default="1,8,32,128", type=lambda s: [int(v) for v in s.split(",")])
    parser.add_argument("--batches", type=int, default=5, help="timed batches per size (after one warm-up)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    names = args.models.split(",") if args.models else [name.removeprefix("models.") for name in ZOO]
    rows = []
    for name in names:
        rows.append(bench_model(name, args.sizes, args.batches))
        print(f"{name}: done", file=sys.stderr, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    write_results(rows, args, args.out)
    print((args.out / "batch.md").read_text())


if __name__ == "__main__":
    main()
