"""What slows eager torch in a process that also runs ONNX Runtime (issue 29), measured in one process.

    python benchmarks/eager_neighbours.py [--model skipnet_rnn] [-n 20] [--rounds 5]

Eager PyTorch is timed on each input right after one call of a *neighbour* on the same
input, the neighbours taking turns round by round (so a busy machine slows all alike):
nothing (eager alone), the dycl-compiled model (default threads, and ``threads=1``), and
the path's traced graph in an ONNX Runtime session created with default options (spinning
intra-op pool) and with spinning off (``session.intra_op.allow_spinning=0``, what dycl's
sessions and its oracles use); and the model compiled with a pool for every sub-DNN
(``Levers(small_graphs_on_caller=False)``), saved and loaded twice: its sessions as they are and with
``DYCL_ORT_SPIN=run`` (pool threads spin while a run lasts, ``session.force_spinning_stop``).
Run it also with ``OMP_WAIT_POLICY=PASSIVE`` (torch's OpenMP threads then sleep at once instead of
spinning) to tell the two kinds of spinning apart. Prints eager's median ms after each neighbour and
its ratio to eager alone. ``--blocks``: each neighbour's block on all inputs, then eager's block (as
the bench's block method orders them); the median over rounds of each eager block's median.
"""

from __future__ import annotations

import argparse
import importlib
import io
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import onnxruntime as ort
import torch
from dycl.hcfg.levers import Levers

import dycl
from dycl.harness.timing import machine, taken

sys.path.append(str(Path(__file__).resolve().parents[1]))  # the zoo (models/)


def traced_session(model: torch.nn.Module, args: tuple, spinning: bool):
    """The path of ``args`` traced to ONNX, run by a session with default options but spinning."""
    class First(torch.nn.Module):  # the first tensor output: a count returned beside it would be a constant
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs):
            outputs = self.model(*inputs)
            return outputs if isinstance(outputs, torch.Tensor) else next(
                o for o in outputs if isinstance(o, torch.Tensor))

    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(First().eval(), args, buffer, dynamo=False, opset_version=17)
    options = ort.SessionOptions()
    if not spinning:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(buffer.getvalue(), options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return lambda *a: session.run(None, {n: t.numpy() for n, t in zip(names, a)})


def measure(name: str, n: int, rounds: int, by_blocks: bool = False) -> dict[str, float]:
    zoo = importlib.import_module(f"models.{name}")
    model, example = zoo.build()
    inputs = [x if isinstance(x, tuple) else (x,) for x in (zoo.sample(s) for s in range(n))]
    compiled = dycl.compile(model, example)
    with tempfile.TemporaryDirectory() as scratch:
        pooled = dycl.compile(model, example, optimize=Levers(small_graphs_on_caller=False))
        artifact = pooled.save(Path(scratch) / "net")
        os.environ["DYCL_ORT_SPIN"] = "run"  # read at load
        try:
            spinning = dycl.load(artifact, threads=2)
        finally:
            del os.environ["DYCL_ORT_SPIN"]
        pools = dycl.load(artifact, threads=2)
    neighbours = {"alone": lambda *a: None, "dycl": compiled,
                  "dycl, threads=1": dycl.compile(model, example, threads=1),
                  "dycl saved, pools": pools, "dycl saved, pools spin in run": spinning,
                  "ORT default (spinning)": traced_session(model, inputs[0], spinning=True),
                  "ORT spinning off": traced_session(model, inputs[0], spinning=False)}
    times: dict[str, list[float]] = {key: [] for key in neighbours}
    keys = list(neighbours)
    with torch.no_grad():
        for args in inputs[:3]:
            model(*args)
        for turn in range(rounds):
            for key in keys[turn % len(keys):] + keys[:turn % len(keys)]:
                if by_blocks:
                    times[key].append(_block_after(neighbours[key], model, inputs))
                    continue
                for args in inputs:
                    neighbours[key](*args)
                    start = time.perf_counter()
                    model(*args)
                    times[key].append((time.perf_counter() - start) * 1000)
    return {key: statistics.median(values) for key, values in times.items()}


def _block_after(neighbour, model: torch.nn.Module, inputs) -> float:
    """The neighbour on every input, then eager's block as ``dycl.harness.timing.blocks`` times it (one
    untimed call, then every input): the block's median ms."""
    for args in inputs:
        neighbour(*args)
    model(*inputs[0])
    times = []
    for args in inputs:
        start = time.perf_counter()
        model(*args)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="skipnet_rnn")
    parser.add_argument("-n", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--blocks", action="store_true", help="eager's whole block after the neighbour's whole block")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    medians = measure(args.model, args.n, args.rounds, args.blocks)
    print(f"# eager {args.model} right after each neighbour; {machine()}; {taken()}")
    for key, ms in medians.items():
        print(f"{key:24s} {ms:8.2f} ms   x{ms / medians['alone']:.2f} of eager alone")


if __name__ == "__main__":
    main()
