"""Cost of max pooling's NaN/-inf repair in a zoo model's single graph (issue 29, ``onnx_pool_average``).

    python benchmarks/pool_repair.py [--models sdn_wrn32_4,caption_googlenet] [-n 600]

Builds each model's single graph (``Levers(single_graph="on")``) three ways -- max pooling
unrepaired (not sound: the reference), repaired by pooling 0/1 flags (the form before), and by one
average pooling (dycl's form now) -- checks that the two repaired graphs agree on the example,
and times the three ONNX Runtime sessions (one thread each) in alternation in one process, input
by input, rotating the order: median ms of ``n`` runs each. Prints a markdown table with the
machine and its load."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnxruntime as ort
from dycl.hcfg.levers import Levers

import dycl
from dycl.backends import onnx_nan_reductions
from dycl.harness.timing import machine

sys.path.append(str(Path(__file__).resolve().parents[1]))  # the zoo (models/)
FORMS = ("unrepaired", "flag pooling", "one average")


@contextlib.contextmanager
def _form(form: str) -> Iterator[None]:
    """The repair ``form`` for the exports inside the block (this script's own switch)."""
    wrappers, average = dict(onnx_nan_reductions.NAN_WRAPPERS), onnx_nan_reductions.minus_inf_and_nan_by_average
    if form == "unrepaired":
        for n in (1, 2, 3):
            onnx_nan_reductions.NAN_WRAPPERS.pop(f"aten::max_pool{n}d")
    elif form == "flag pooling":
        onnx_nan_reductions.minus_inf_and_nan_by_average = lambda *args: None
    try:
        yield
    finally:
        onnx_nan_reductions.NAN_WRAPPERS.update(wrappers)
        onnx_nan_reductions.minus_inf_and_nan_by_average = average


def _session(name: str, form: str) -> tuple[ort.InferenceSession, dict[str, np.ndarray]]:
    model, example = importlib.import_module(f"models.{name}").build()
    with _form(form):
        compiled = dycl.compile(model, example, optimize=Levers(single_graph="on"), check=False, dynamic=False)
    graphs = [data for file, data in compiled._result.files.items() if file.endswith(".onnx")]
    assert len(graphs) == 1, "expected one graph"
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(graphs[0], options, providers=["CPUExecutionProvider"])
    return session, {session.get_inputs()[0].name: example.numpy()}


def measure(name: str, runs: int) -> dict[str, float]:
    """Median ms per form of ``name``'s single graph."""
    sessions = {form: _session(name, form) for form in FORMS}
    results = {form: session.run(None, feeds) for form, (session, feeds) in sessions.items()}
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(results["flag pooling"], results["one average"]))
    times: dict[str, list[float]] = {form: [] for form in FORMS}
    for i in range(runs + 20):
        for form in FORMS[i % 3:] + FORMS[:i % 3]:
            session, feeds = sessions[form]
            start = time.perf_counter()
            session.run(None, feeds)
            if i >= 20:
                times[form].append(time.perf_counter() - start)
    return {form: statistics.median(values) * 1e3 for form, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="sdn_wrn32_4,caption_googlenet")
    parser.add_argument("-n", type=int, default=600)
    args = parser.parse_args()
    print(f"{machine()}; median of {args.n} runs each, intra_op_num_threads=1\n")
    print("| model | unrepaired ms | flag pooling ms | one average ms | one average / flag pooling |"
          " one average / unrepaired |")
    print("|---|---|---|---|---|---|")
    for name in args.models.split(","):
        ms = measure(name, args.n)
        print(f"| {name} | {ms['unrepaired']:.3f} | {ms['flag pooling']:.3f} | {ms['one average']:.3f} | "
              f"{ms['one average'] / ms['flag pooling']:.3f} | {ms['one average'] / ms['unrepaired']:.3f} |")


if __name__ == "__main__":
    main()
