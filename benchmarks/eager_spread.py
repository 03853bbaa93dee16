"""Is the bench's in-process eager different from eager in a fresh process, or is eager itself this
spread? (issue 29) Processes of four kinds, taking turns, each timing eager by blocks.

    python benchmarks/eager_spread.py [--model skipnet_rnn] [-n 20] [--processes 3] [--rounds 5]
                                      [--torch-compile]

- *fresh*: ``fresh_eager.py``, eager alone (no ONNX Runtime, nothing compiled);
- *bench*: a process like the bench's: the model compiled by dycl (and by ``torch.compile`` with
  ``--torch-compile``), then eager timed by ``dycl.harness.timing.blocks`` among those contenders;
- the same two with ``OMP_NUM_THREADS=1`` (torch's intra-op team of one: no barrier to wait at).

The kinds take turns process by process (a busy machine slows all alike). Printed per kind: every
process's eager median (ms) and the lowest-highest of its rounds' medians; for the *bench* kinds also
each thread's CPU time over eager's blocks, each block right after another contender's
(``/proc/self/task``): a thread beyond torch's own that runs then is a neighbour competing for a core. If the bench's
processes differ from the fresh ones by more than the fresh ones differ among themselves, something
in the bench's process slows eager; if not, one fresh process is no better a reference than the
bench's own column (``benchmarks/eager_column.py`` says what the bench does about it).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import pickle
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child(name: str, data: Path, rounds: int, torch_compile: bool) -> dict:
    """The *bench* kind, in this process: eager timed among dycl (and torch.compile)."""
    import torch

    import dycl
    from dycl.harness.timing import blocks

    sys.path.append(str(ROOT))
    model, example = importlib.import_module(f"models.{name}").build()
    inputs = [tuple(torch.from_numpy(a) for a in args) for args in pickle.loads(data.read_bytes())]
    contenders = {"eager": model, "dycl": dycl.compile(model, example, progress=False)}
    if torch_compile:
        contenders["torch.compile"] = torch.compile(model)
    eager = blocks(contenders, inputs, rounds=rounds)["eager"]
    return {"median_ms": eager.median_ms, "rounds_ms": list(eager.rounds_ms),
            "threads_cpu_ms": threads_during_eager(contenders, inputs)}


def thread_cpu_ms() -> dict[str, float]:
    """CPU time (user + system, ms) of each thread of this process, keyed ``tid name``."""
    tick = os.sysconf("SC_CLK_TCK")
    found = {}
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(FileNotFoundError):
            name = Path(f"/proc/self/task/{tid}/comm").read_text().strip()
            fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
            found[f"{tid} {name}"] = (int(fields[11]) + int(fields[12])) * 1000 / tick
    return found


def threads_during_eager(contenders: dict, inputs) -> list[float]:
    """Each thread's CPU time (ms, highest first) over eager's blocks, each block right after
    another contender's: a thread other than torch's own that runs then competes with eager."""
    import torch

    spent: dict[str, float] = {}
    with torch.no_grad():
        for name, other in contenders.items():
            if name == "eager":
                continue
            for args in inputs:
                other(*args)
            before = thread_cpu_ms()
            for args in inputs:
                contenders["eager"](*args)
            for thread, ms in thread_cpu_ms().items():
                spent[thread] = spent.get(thread, 0.0) + ms - before.get(thread, ms)
    return sorted(spent.values(), reverse=True)


def run(kind: str, name: str, data: Path, rounds: int, torch_compile: bool) -> dict:
    env = dict(os.environ)
    if kind.endswith("1 thread"):
        env["OMP_NUM_THREADS"] = "1"
    if kind.startswith("fresh"):
        command = [str(ROOT / "benchmarks" / "fresh_eager.py"), f"models.{name}", str(data), str(ROOT), str(rounds)]
    else:
        command = [__file__, "--child", "--model", name, "--data", str(data), "--rounds", str(rounds)]
        command += ["--torch-compile"] if torch_compile else []
    out = subprocess.run([sys.executable, *command], capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="skipnet_rnn")
    parser.add_argument("-n", type=int, default=20)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--torch-compile", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if args.child:
        print(json.dumps(child(args.model, args.data, args.rounds, args.torch_compile)))
        return
    sys.path.append(str(ROOT))
    zoo = importlib.import_module(f"models.{args.model}")
    samples = [x if isinstance(x, tuple) else (x,) for x in (zoo.sample(s) for s in range(args.n))]
    kinds = ["fresh", "bench", "fresh, 1 thread", "bench, 1 thread"]
    found: dict[str, list[dict]] = {kind: [] for kind in kinds}
    with tempfile.TemporaryDirectory() as scratch:
        data = Path(scratch) / "inputs.pkl"
        data.write_bytes(pickle.dumps([tuple(a.numpy() for a in args) for args in samples]))
        for turn in range(args.processes):
            for kind in kinds[turn % 4:] + kinds[:turn % 4]:
                found[kind].append(run(kind, args.model, data, args.rounds, args.torch_compile))
    print(f"# eager {args.model} by blocks, -n {args.n}, {args.rounds} rounds, {args.processes} processes per kind")
    for kind, results in found.items():
        cells = ", ".join(f"{r['median_ms']:.2f} ({min(r['rounds_ms']):.2f}–{max(r['rounds_ms']):.2f})"
                          for r in results)
        print(f"{kind:16s} {cells}")
    for kind in ("bench", "bench, 1 thread"):
        for result in found[kind]:
            cpu = result["threads_cpu_ms"]
            print(f"{kind}: {len(cpu)} threads; CPU ms over eager's blocks, highest first: "
                  + ", ".join(f"{ms:.0f}" for ms in cpu))


if __name__ == "__main__":
    main()
