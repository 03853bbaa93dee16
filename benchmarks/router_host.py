"""The per-sample router's cost (issue 19), before and after a change to it, side by side in one process.

    python benchmarks/router_host.py --before REV [--models skipnet_ff,blockdrop,sdn_mobilenet] [--sizes 1,32]
                                     [--reps 100]

For each zoo model it compiles ``per_sample=True`` once and builds two hosts from
the same artifact files, differing only in the router section of ``host.py``
(``hostgen/host_router.py``, copied into it): as at git revision ``REV`` (one that has
that module), and as in the working tree. On the same batches, the two take turns (interleaved, medians
over ``--reps`` calls):

- *end to end*: wall ms of one call on the batch (sub-DNNs on ONNX Runtime);
- *host only*: the same call with every sub-DNN call replaced by a replay of
  what it returned for that batch, so that only the router and the host's Python
  run: wall and CPU ms, the figure a change to the router moves (and the one least
  disturbed by a busy machine).

Both hosts must return the same outputs bit for bit, or the script stops.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dycl.hostgen.artifact_check import verified_artifact  # noqa: E402
from dycl.hostgen.copies import copied  # noqa: E402
from dycl.hostgen.manifest import DYCL_VERSION  # noqa: E402

import dycl  # noqa: E402
from dycl.artifact import host_model  # noqa: E402
from dycl.per_sample.testing import batch_of  # noqa: E402

ROUTER_FILE = "hostgen/host_router.py"
#: the rule above the router's copy in a per-sample host, and the class after it (hostgen.template)
ROUTER_RULE = "# -- dycl's hostgen/host_router.py, copied"
MODEL_CLASS = "\n\n\nclass Model("


def router_at(revision: str | None) -> str:
    """``hostgen/host_router.py`` as a host holds it, at git ``revision`` (None: the working tree)."""
    if revision is None:
        return copied(ROOT / ROUTER_FILE)
    shown = subprocess.run(["git", "-C", str(ROOT), "show", f"{revision}:{ROUTER_FILE}"],
                           capture_output=True, text=True)
    if shown.returncode:
        sys.exit(f"router_host.py: {revision} has no {ROUTER_FILE} (the router became a module after it)")
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "host_router.py"
        path.write_text(shown.stdout)
        return copied(path)


def with_router(source: str, router: str) -> str:
    """``source`` (a per-sample host) with its copy of the router replaced by ``router``."""
    start = source.index("\n", source.index(ROUTER_RULE)) + 1
    end = source.index(MODEL_CLASS, start)
    return source[:start] + router.strip("\n") + "\n" + source[end:]


def same(a, b) -> bool:
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    return type(a) is type(b) and a == b


class Replay:
    """Every sub-DNN of ``host`` recorded on one call, then replayed in the same order."""

    def __init__(self, host, batch: list) -> None:
        self.tape: list = []
        self.cursor = 0
        real = host._variants
        host._variants = {index: {key: self._record(f) for key, f in variants.items()}
                          for index, variants in real.items()}
        host._call = {index: next(iter(variants.values())) for index, variants in host._variants.items()
                      if len(variants) == 1}
        self.expected = host(*batch)
        host._variants = {index: {key: self._play for key in variants} for index, variants in real.items()}
        host._call = {index: self._play for index, variants in real.items() if len(variants) == 1}

    def _record(self, function):
        def call(*args):
            outputs = function(*args)
            self.tape.append(outputs)
            return outputs
        return call

    def _play(self, *args):
        outputs = self.tape[self.cursor]
        self.cursor += 1
        return outputs


def _replaying(host, batch: list):
    """A call of ``host`` on ``batch`` with its sub-DNNs replayed."""
    replay = Replay(host, batch)

    def call():
        replay.cursor = 0
        return host(*batch)

    if not same(call(), replay.expected):
        raise AssertionError("a replayed call returned other outputs than the recorded one")
    return call


def _interleaved(runs: dict, reps: int) -> dict:
    wall = {name: [] for name in runs}
    cpu = {name: [] for name in runs}
    for rep in range(reps):
        for name in (list(runs) if rep % 2 else list(runs)[::-1]):
            c, s = time.process_time(), time.perf_counter()
            runs[name]()
            wall[name].append(time.perf_counter() - s)
            cpu[name].append(time.process_time() - c)
    return {name: (statistics.median(wall[name]) * 1e3, statistics.median(cpu[name]) * 1e3) for name in runs}


def bench_model(name: str, before: str, sizes: list[int], reps: int) -> None:
    zoo = importlib.import_module(f"models.{name}")
    model, example = zoo.build()
    compiled = dycl.compile(model, example, per_sample=True, progress=False)
    with tempfile.TemporaryDirectory() as directory:
        manifest, files = verified_artifact(str(compiled.save(Path(directory) / name)), DYCL_VERSION)
    source = files[manifest.host.file].decode("utf-8")
    routers = {"before": router_at(before), "after": router_at(None)}

    def fresh():
        return {label: host_model(with_router(source, router), manifest, files, name=f"router_{label}")
                for label, router in routers.items()}

    hosts = fresh()
    for size in sizes:
        batches = []
        for k in range(3):
            samples = [zoo.sample(10_000 + k * size + i) for i in range(size)]
            batches.append([a.numpy() if isinstance(a, torch.Tensor) else a for a in batch_of(samples)])
        for batch in batches:
            first, second = (host(*batch) for host in hosts.values())
            if not same(first, second):
                raise AssertionError(f"{name} at batch {size}: the two routers return different outputs")
        end = _interleaved({label: functools.partial(host, *batches[0]) for label, host in hosts.items()}, reps)
        host_only = _interleaved({label: _replaying(host, batches[0]) for label, host in fresh().items()}, reps)
        b, a = end["before"][0], end["after"][0]
        hb, ha = host_only["before"], host_only["after"]
        print(f"| {name} | {size} | {b:.2f} | {a:.2f} | {a / b:.3f} | {hb[0]:.3f} / {hb[1]:.3f} | "
              f"{ha[0]:.3f} / {ha[1]:.3f} | {ha[1] / hb[1]:.3f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="git revision whose router is the baseline")
    parser.add_argument("--models", default="skipnet_ff,blockdrop,sdn_mobilenet")
    parser.add_argument("--sizes", default="1,32", type=lambda s: [int(v) for v in s.split(",")])
    parser.add_argument("--reps", type=int, default=100)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    print(f"Router before ({args.before}) and after (working tree); ms per batch, medians of {args.reps} "
          "interleaved calls; host only = sub-DNN calls replayed, wall / CPU.\n")
    print("| model | B | end to end before | after | after/before | host only before | after | after/before (CPU) |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        bench_model(name, args.before, args.sizes, args.reps)


if __name__ == "__main__":
    main()
