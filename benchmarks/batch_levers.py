"""Per-sample batched serving levers, A/B in one process (issue 29).

    python benchmarks/batch_levers.py --models sdn_vgg19,blockdrop [--size 32] [--rounds 9] [--env DYCL_ORT_SPIN=run]
    python benchmarks/batch_levers.py --models sdn_vgg19 --off small_graphs_on_caller

Each model is compiled with ``per_sample=True`` and saved (*base*); *lever* is that artifact
loaded with the ``--env`` settings applied during its load (the host reads ``DYCL_ORT_*`` when it
loads), or, with ``--off``, the model compiled again with that ``Levers`` field off. Both run
beside the static whole network (``batch.py``'s ``static_network``). The three take turns on the same batches of
``--size`` samples for ``--rounds`` rounds (the order rotating per round); reported: the median
ms of each, the spread (min-max) and lever / static and base / static. Every lever batch's
outputs must equal the base's bit for bit (a lever changes how, never what, is computed).
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from batch import static_network  # noqa: E402
from dycl.hcfg.levers import Levers  # noqa: E402

import dycl  # noqa: E402
from dycl.per_sample.testing import batch_of, paths_of  # noqa: E402


def _loaded(directory: Path, env: dict[str, str]):
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        return dycl.load(directory)
    finally:
        for name, value in saved.items():
            os.environ.pop(name, None) if value is None else os.environ.__setitem__(name, value)


def _flat(value) -> list[np.ndarray]:
    if isinstance(value, (tuple, list)):
        return [array for item in value for array in _flat(item)]
    return [np.asarray(value.detach() if isinstance(value, torch.Tensor) else value)]


def bench(name: str, size: int, rounds: int, env: dict[str, str], off: str, workdir: Path) -> dict:
    zoo = importlib.import_module(f"models.{name}")
    model, example = zoo.build()
    directory = workdir / name
    dycl.compile(model, example, per_sample=True, progress=False).save(directory)
    if off:
        dycl.compile(model, example, per_sample=True, progress=False,
                     optimize=Levers(**{off: False})).save(workdir / f"{name}_off")
    base, lever = _loaded(directory, {}), _loaded(workdir / f"{name}_off" if off else directory, env)
    candidates = [zoo.sample(seed) for seed in range(64)]
    paths = paths_of(model, candidates)
    static, names = static_network(model, candidates[max(range(len(candidates)), key=lambda i: len(paths[i]))])
    batches = [batch_of([zoo.sample(20_000 + r * size + i) for i in range(size)]) for r in range(rounds + 1)]
    times: dict[str, list[float]] = {"base": [], "lever": [], "static": []}
    differ = 0
    with torch.no_grad():
        base(*batch_of(candidates)), lever(*batch_of(candidates))
        for index, batch in enumerate(batches):
            feeds = dict(zip(names, [a.numpy() for a in batch if isinstance(a, torch.Tensor)]))
            runs = {"base": lambda batch=batch: base(*batch), "lever": lambda batch=batch: lever(*batch),
                    "static": lambda feeds=feeds: static.run(None, feeds)}
            order = list(runs)[index % 3:] + list(runs)[:index % 3]
            got = {}
            for contender in order:
                start = time.perf_counter()
                got[contender] = runs[contender]()
                if index:  # the first batch warms up
                    times[contender].append((time.perf_counter() - start) * 1000.0)
            differ += any(not np.array_equal(a, b) for a, b in zip(_flat(got["base"]), _flat(got["lever"])))
    med = {contender: statistics.median(ms) for contender, ms in times.items()}
    return {"name": name, "median_ms": med, "spread": {c: (min(ms), max(ms)) for c, ms in times.items()},
            "differ": differ}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", required=True)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE applied while the lever loads")
    parser.add_argument("--off", default="", help="a Levers field the lever's compile turns off")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    env = dict(item.split("=", 1) for item in args.env)
    lever = env or f"{args.off}=False"
    print(f"lever {lever}, B={args.size}, {args.rounds} rounds, load {os.getloadavg()[0]:.1f}")
    print("| model | base ms | lever ms | static ms | base/static | lever/static | differ |")
    with tempfile.TemporaryDirectory() as workdir:
        for name in args.models.split(","):
            row = bench(name, args.size, args.rounds, env, args.off, Path(workdir))
            m, s = row["median_ms"], row["spread"]
            print(f"| {name} | {m['base']:.2f} ({s['base'][0]:.1f}-{s['base'][1]:.1f}) | {m['lever']:.2f} "
                  f"({s['lever'][0]:.1f}-{s['lever'][1]:.1f}) | {m['static']:.2f} | {m['static'] / m['base']:.2f} "
                  f"| {m['static'] / m['lever']:.2f} | {row['differ']} |", flush=True)


if __name__ == "__main__":
    main()
