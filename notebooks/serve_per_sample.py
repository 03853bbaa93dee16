"""Serve a saved per-sample artifact with Ray Serve: concurrent single-sample requests
are batched by the engine, and the artifact's torch-free host routes each batch.

    pip install -c constraints.txt -e '.[serve]'          # Ray Serve (the serve extra)
    python notebooks/serve_per_sample.py build OUT_DIR    # compile and save (needs torch)
    python notebooks/serve_per_sample.py serve OUT_DIR    # serve the saved artifact (no torch)

``build`` compiles the zoo's SDN-VGG19 (early exits on softmax confidence, written
for one sample) with ``per_sample=True``, saves it to ``OUT_DIR/artifact`` and
writes ``OUT_DIR/requests.npz``: 32 samples and what eager PyTorch returns for each
alone. ``serve`` never imports torch or dycl: it starts Ray on this machine, deploys
the artifact (``serve_deployment.py``), sends the 32 samples as concurrent
single-sample requests, checks every response against eager, and prints how the
engine batched them. On a cluster, ``ray.init(address=...)`` and
``PerSampleModel.options(num_replicas=N)`` scale the same deployment out; every
node then needs the artifact directory and ``serve_deployment.py`` (a shared
filesystem, or Ray's ``runtime_env`` ``working_dir``/``py_modules``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

NOTEBOOKS = Path(__file__).resolve().parent
SEEDS = 32


def build(out: Path) -> Path:
    """Compile the model per sample and save it; write the requests and their eager outputs."""
    import torch

    sys.path.insert(0, str(NOTEBOOKS.parent))  # the zoo (models/) is not installed
    import dycl
    from models import sdn_vgg19

    model, example = sdn_vgg19.build()
    compiled = dycl.compile(model, example, per_sample=True, progress=False)  # example: one sample
    artifact = compiled.save(out / "artifact")
    samples = [sdn_vgg19.sample(seed) for seed in range(SEEDS)]
    with torch.no_grad():
        expected = [model(sample).numpy() for sample in samples]
    np.savez(out / "requests.npz", samples=np.concatenate([s.numpy() for s in samples]),
             expected=np.concatenate(expected))
    return artifact


def start_ray() -> None:
    """Ray on this machine, without its dashboard or an HTTP proxy (the example calls
    the deployment through its handle); replicas import ``serve_deployment`` from here."""
    import ray
    from ray import serve

    ray.init(include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([str(NOTEBOOKS), os.environ.get("PYTHONPATH", "")])}})
    serve.start(proxy_location="Disabled")


def stop_ray() -> None:
    import ray
    from ray import serve

    serve.shutdown()
    ray.shutdown()


async def _timed(handle: Any, sample: np.ndarray) -> tuple[Any, float]:
    start = time.perf_counter()
    output = await handle.remote(sample)
    return output, time.perf_counter() - start


def send_concurrently(handle: Any, samples: Sequence[np.ndarray]) -> tuple[list[Any], list[float]]:
    """Send each sample as its own request, all at once; their outputs and latencies (s)."""
    async def all_requests() -> list[tuple[Any, float]]:
        return await asyncio.gather(*[_timed(handle, sample) for sample in samples])

    results = asyncio.run(all_requests())
    return [output for output, _ in results], [latency for _, latency in results]


def serve_saved(out: Path) -> None:
    sys.path.insert(0, str(NOTEBOOKS))
    from serve_deployment import start

    requests = np.load(out / "requests.npz")
    samples = [row[None] for row in requests["samples"]]
    start_ray()
    try:
        handle = start(out / "artifact", max_batch_size=16)
        outputs, latencies = send_concurrently(handle, samples)
        stats = handle.stats.remote().result()
    finally:
        stop_ray()
    worst = max(float(np.abs(output - expected[None]).max())
                for output, expected in zip(outputs, requests["expected"]))
    print(f"{len(samples)} concurrent requests -> batches of {stats['batch_sizes']}; "
          f"max |served - eager alone| = {worst:.1e}; p50 latency {np.median(latencies) * 1e3:.1f} ms; "
          f"torch or dycl imported in the replica: {stats['imported'] or 'no'}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["build", "serve"])
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    if args.command == "build":
        print("saved", build(args.out))
    else:
        serve_saved(args.out)


if __name__ == "__main__":
    main()
