"""Concurrent single-sample requests to a saved per-sample artifact behind Ray Serve
(issue 19 item 6), against serving them one at a time.

    pip install -c constraints.txt -e '.[serve]'
    python benchmarks/serve.py [--model sdn_vgg19] [--requests 512] [--clients 32] [--max-batch 32]
                               [--wait-ms 5] [--rounds 3] [--out DIR]

The zoo model is compiled with ``per_sample=True`` and saved; the same requests
(one sample each, seeds 0..N-1) go to each contender in turn:

- ``host_1``: the saved host in this process, no engine, one request at a time;
- ``host_batches``: the saved host in this process, no engine, the requests cut
  into batches of ``--max-batch`` beforehand (what batching can give at most;
  a request's latency is its batch's);
- ``serve_1``: Ray Serve with ``max_batch_size=1`` (one request at a time per
  replica), ``--clients`` concurrent clients;
- ``serve_batched``: Ray Serve with ``@serve.batch(max_batch_size=--max-batch,
  batch_wait_timeout_s=--wait-ms)``, ``--clients`` concurrent clients;
- ``serve_batched_seq``: the same deployment with one client (a request is sent
  when the previous one is answered): the engine's latency per request.

Each Serve contender has one replica (on this machine; its host is torch-free)
and a warm-up of ``--clients`` requests first. Every contender serves all the
requests ``--rounds`` times (the two in-process ones alternating); reported is
the round with the median throughput: samples/s (requests over wall time),
p50/p99 request latency (ms, from send to answer), the batch sizes the replica
ran; and responses, over all rounds, that differ from eager on that sample alone
(must be 0). Writes ``DIR/serve.md`` and ``DIR/serve.json`` (default: this folder).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import platform
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "notebooks"))

import serve_deployment  # noqa: E402
import serve_per_sample  # noqa: E402

import dycl  # noqa: E402

ATOL = 1e-4
CONTENDERS = ("host_1", "host_batches", "serve_1", "serve_batched", "serve_batched_seq")


def summary(latencies: list[float], wall: float, outputs: list[np.ndarray], expected: np.ndarray,
            batch_sizes: list[int]) -> dict[str, Any]:
    bad = sum(not np.allclose(out, expected[i:i + 1], atol=ATOL, rtol=0) for i, out in enumerate(outputs))
    return {"samples_per_s": len(latencies) / wall, "p50_ms": float(np.percentile(latencies, 50) * 1e3),
            "p99_ms": float(np.percentile(latencies, 99) * 1e3), "mismatched": int(bad),
            "batches": len(batch_sizes), "mean_batch": float(np.mean(batch_sizes)), "max_batch": max(batch_sizes)}


def in_process(host: Any, samples: np.ndarray, batch: int) -> tuple[list[float], float, list[np.ndarray], list[int]]:
    """Batches of ``batch`` requests called in turn; each request's latency is its batch's."""
    host(samples[:batch])  # warm-up
    latencies, outputs, sizes = [], [], []
    start = time.perf_counter()
    for first in range(0, len(samples), batch):
        began = time.perf_counter()
        output = host(samples[first:first + batch])
        took = time.perf_counter() - began
        count = len(output)
        latencies += [took] * count
        outputs += [serve_deployment.split(output, i) for i in range(count)]
        sizes.append(count)
    return latencies, time.perf_counter() - start, outputs, sizes


def through_serve(handle: Any, samples: np.ndarray, clients: int) -> tuple[list[float], float, list[np.ndarray]]:
    """``clients`` concurrent clients, each sending its next request when answered."""
    latencies: list[float] = [0.0] * len(samples)
    outputs: list[Any] = [None] * len(samples)
    pending = iter(range(len(samples)))

    async def client() -> None:
        for index in pending:
            began = time.perf_counter()
            outputs[index] = await handle.remote(samples[index:index + 1])
            latencies[index] = time.perf_counter() - began

    async def run() -> float:
        start = time.perf_counter()
        await asyncio.gather(*[client() for _ in range(clients)])
        return time.perf_counter() - start

    wall = asyncio.run(run())
    return latencies, wall, outputs


def bench(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    zoo = importlib.import_module(f"models.{args.model}")
    model, example = zoo.build()
    artifact = dycl.compile(model, example, per_sample=True, progress=False).save(scratch / "artifact")
    samples_t = [zoo.sample(seed) for seed in range(args.requests)]
    with torch.no_grad():
        expected = np.concatenate([model(sample).numpy() for sample in samples_t])
    samples = np.concatenate([sample.numpy() for sample in samples_t])

    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in CONTENDERS}
    host = serve_deployment.load_host(artifact)
    for _ in range(args.rounds):  # alternating, so that a burst of other load hits both
        for name, batch in (("host_1", 1), ("host_batches", args.max_batch)):
            latencies, wall, outputs, sizes = in_process(host, samples, batch)
            rounds[name].append(summary(latencies, wall, outputs, expected, sizes))
    del host

    serve_per_sample.start_ray()
    try:
        from ray import serve

        for name, max_batch, clients in (("serve_1", 1, args.clients),
                                          ("serve_batched", args.max_batch, args.clients),
                                          ("serve_batched_seq", args.max_batch, 1)):
            handle = serve_deployment.start(artifact, name=name, max_batch_size=max_batch,
                                            batch_wait_timeout_s=args.wait_ms / 1e3)
            through_serve(handle, samples[:args.clients], args.clients)  # warm-up: every path's session
            for _ in range(args.rounds):
                done = len(handle.stats.remote().result()["batch_sizes"])
                latencies, wall, outputs = through_serve(handle, samples, clients)
                stats = handle.stats.remote().result()
                rounds[name].append(summary(latencies, wall, outputs, expected, stats["batch_sizes"][done:]))
                rounds[name][-1]["replica_imported"] = stats["imported"]
            serve.delete(name)
    finally:
        serve_per_sample.stop_ray()
    results = {}
    for name, measured in rounds.items():
        ranked = sorted(measured, key=lambda r: r["samples_per_s"])
        results[name] = ranked[len(ranked) // 2] | {"rounds_samples_per_s": [r["samples_per_s"] for r in measured],
                                                   "mismatched": sum(r["mismatched"] for r in measured)}
        print(f"{name}: {results[name]['samples_per_s']:.0f} samples/s", file=sys.stderr, flush=True)
    return results


def write_results(results: dict[str, Any], args: argparse.Namespace, machine: dict[str, Any]) -> None:
    import ray

    command = (f"python benchmarks/serve.py --model {args.model} --requests {args.requests} --clients {args.clients} "
               f"--max-batch {args.max_batch} --wait-ms {args.wait_ms:g} --rounds {args.rounds}")
    lines = [
        "# Serving a saved per-sample artifact with Ray Serve (issue 19 item 6)", "",
        f"Command: `{command}`",
        f"Machine: {machine['machine']}, {machine['cpus']} CPUs; load average {machine['load_before']:.2f} before, "
        f"{machine['load_after']:.2f} after (other work on the machine); Ray {ray.__version__}, one replica, "
        "ONNX Runtime with the host's default threads.", "",
        f"{args.requests} single-sample requests to `{args.model}` compiled with `per_sample=True` and saved. "
        "*host 1*: the saved host in process, one request at a time, no engine; *host batches*: the same, requests "
        f"cut into batches of {args.max_batch} beforehand (no engine, a request waits for its batch); *serve 1*: Ray "
        f"Serve, `max_batch_size=1`, {args.clients} concurrent clients; *serve batched*: `@serve.batch"
        f"(max_batch_size={args.max_batch}, batch_wait_timeout_s={args.wait_ms / 1e3:g})`, {args.clients} "
        "concurrent clients; *serve batched, 1 client*: the same, one request in flight at a time. Latency is per "
        "request, send to answer; *batches*: how many the replica ran / mean size / largest; *bad*: responses that "
        "differ from eager on that sample alone, over all rounds (must be 0). Each contender served the requests "
        f"{args.rounds} times; the round with the median throughput is shown.", "",
        "| contender | samples/s | p50 ms | p99 ms | batches | bad |", "|---|---|---|---|---|---|",
    ]
    labels = {"host_1": "host 1", "host_batches": "host batches", "serve_1": "serve 1",
              "serve_batched": "serve batched", "serve_batched_seq": "serve batched, 1 client"}
    for name in CONTENDERS:
        r = results[name]
        lines.append(f"| {labels[name]} | {r['samples_per_s']:.0f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | "
                     f"{r['batches']} / {r['mean_batch']:.1f} / {r['max_batch']} | {r['mismatched']} |")
    ratio = results["serve_batched"]["samples_per_s"] / results["serve_1"]["samples_per_s"]
    lines += ["", f"Batched serving: {ratio:.2f}x the throughput of serving one request at a time."]
    out = args.out
    (out / "serve.md").write_text("\n".join(lines) + "\n")
    (out / "serve.json").write_text(json.dumps({"command": command, "machine": machine, "results": results},
                                               indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="sdn_vgg19", help="a zoo model whose output is one tensor")
    parser.add_argument("--requests", type=int, default=512)
    parser.add_argument("--clients", type=int, default=32, help="concurrent clients")
    parser.add_argument("--max-batch", type=int, default=32, help="@serve.batch max_batch_size")
    parser.add_argument("--wait-ms", type=float, default=5.0, help="@serve.batch batch_wait_timeout_s, in ms")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per contender; the median is reported")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    machine = {"machine": platform.machine(), "cpus": os.cpu_count(), "load_before": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as scratch:
        results = bench(args, Path(scratch))
    machine["load_after"] = os.getloadavg()[0]
    args.out.mkdir(parents=True, exist_ok=True)
    write_results(results, args, machine)


if __name__ == "__main__":
    main()
