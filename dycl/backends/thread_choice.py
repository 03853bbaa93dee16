"""Whether an ONNX Runtime sub-DNN runs on the calling thread or in a thread pool: by its
counted cost where that settles it, by a timed run on its example where it does not.

The counted cost (``dycl.backends.onnx_cost``) settles the two ends: a graph of at most
``CALLING_THREAD_MACS`` multiply-accumulates cannot pay for a pool's wake-up and hand-off,
one of more than ``POOL_MACS`` always can. Between them, and where the count is unknown (a
size from data, a sub-graph), whether the pool pays depends on the machine: on a loaded
2-core machine a 5M-MAC convolution block of sdn_resnet56 ran 300 µs on one thread and
350 µs with a pool of two (``benchmarks/boundary_levers.py``). So such a graph is timed:
one session with ``intra_op_num_threads=1`` and one with the pool the loaded model will get
(``$DYCL_THREADS`` or every CPU, spinning off as in ``ort_runtime``), warmed up, then run in
turns on the sub-DNN's first example (up to ``TIMED_RUNS`` turns within ``TIMING_BUDGET_S``, or
``SEPARATED_TURNS`` where the two settings' times do not overlap), and it goes to the calling
thread unless the pool's median is faster by more than ``POOL_MARGIN``.

Note: the margin. On the loaded 2-core machine, times of one graph on one thread and with a pool
of two were within noise of each other for most timed graphs, so a choice by the lower median
flipped between re-decisions of one model's graphs (``benchmarks/thread_choice_stability.py``,
``benchmarks/session_levers.md``). Where the two are that close, the calling thread is the better
side to err on: it wakes no pool, leaves the other core to the rest of the process (eager torch
included) and costs at most the margin on that graph.

Graphs of one structure (``dycl.backends.graph_structure``: the same operators, wiring and
shapes, other weights: BlockDrop's residual blocks of one stage) cost the same, so where the
caller passes one ``settled`` dict for a compile, a structure is timed once and its answer
reused for the others.

Assumes the example is representative of the calls' sizes (a per-sample model's graphs are
given a group of 32 samples, ``PerSampleMode.serving_feeds``) and that compile runs on the
machine (and under the load) the model will serve on. Guarantees: the choice only changes
how many threads a session uses, never what it computes; a graph that cannot be timed
(its session or run fails, an input the example does not give) keeps the pool, as an
unknown cost did before. Unlike the count, a timed choice may differ between two compiles
of one model (it is written in the manifest, so one artifact always runs the same way).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from dycl.backends.graph_structure import structure_key
from dycl.backends.onnx_cost import CALLING_THREAD_MACS, macs

#: more than this many MACs at the example's shapes: the pool pays, no timing needed
#: (about 10 ms of single-threaded work, against a hand-off of tens of microseconds)
POOL_MACS = 50_000_000

#: timed runs per setting at most, and the seconds one graph's timing may take
TIMED_RUNS = 9
TIMING_BUDGET_S = 0.05
#: turns after which two settings whose times do not overlap are settled without the rest
SEPARATED_TURNS = 3
#: a timed graph keeps the pool only where its median there beats the calling thread's by more
#: than this share (module note: a choice made on a near tie flipped from compile to compile)
POOL_MARGIN = 0.25


def pool_threads() -> int:
    """The intra-op threads a loaded model's sessions get by default (``ort_runtime.runtime_options``)."""
    return int(os.environ.get("DYCL_THREADS", "0")) or (os.cpu_count() or 1)


def on_calling_thread(data: bytes, example: Mapping[str, Any], threads: int | None = None,
                      settled: dict[str, bool] | None = None) -> bool:
    """Whether the ONNX model ``data`` should run on the calling thread, ``example`` being its
    inputs by name (tensors or arrays; other values are left out of the shapes). ``settled``:
    the answers of the graphs timed so far in this compile, by structure (module note)."""
    arrays = {name: _array(value) for name, value in example.items()}
    shapes = {name: tuple(value.shape) for name, value in example.items() if hasattr(value, "shape")}
    cost = macs(data, shapes)
    if cost is not None and cost <= CALLING_THREAD_MACS:
        return True
    if cost is not None and cost > POOL_MACS:
        return False
    threads = pool_threads() if threads is None else threads
    if threads <= 1:  # no pool to hand off to
        return True
    key = None if settled is None else f"{threads}:{structure_key(onnx.load_from_string(data), shapes)}"
    if key is not None and key in settled:
        return settled[key]
    timed = time_both(data, arrays, threads)
    answer = timed is not None and timed[0] <= timed[1] * (1 + POOL_MARGIN)
    if key is not None and timed is not None:  # an untimeable graph is not an answer for its structure
        settled[key] = answer
    return answer


def time_both(data: bytes, arrays: Mapping[str, np.ndarray | None], threads: int,
              runs: int = TIMED_RUNS, budget_s: float = TIMING_BUDGET_S) -> tuple[float, float] | None:
    """Median seconds of one run on one thread and with a pool of ``threads``, the two
    sessions taking turns (up to ``runs`` turns within ``budget_s``, or fewer where the two
    settings' times are separated); None where the graph cannot be run on ``arrays``."""
    try:
        sessions = [_session(data, 1), _session(data, threads)]
        feeds = {port.name: _fed(arrays.get(port.name), port.type) for port in sessions[0].get_inputs()}
        if any(value is None for value in feeds.values()):
            return None
        for session in sessions:
            session.run(None, feeds)  # the first run allocates
    except Exception:  # noqa: BLE001 - an untimeable graph keeps the pool (the sound default)
        return None
    times: tuple[list[float], list[float]] = ([], [])
    deadline = time.perf_counter() + budget_s
    for turn in range(runs):
        for index in (0, 1) if turn % 2 == 0 else (1, 0):
            start = time.perf_counter()
            sessions[index].run(None, feeds)
            times[index].append(time.perf_counter() - start)
        if time.perf_counter() > deadline or _separated(times, turn + 1):
            break
    return statistics.median(times[0]), statistics.median(times[1])


def _separated(times: tuple[list[float], list[float]], turns: int) -> bool:
    """After ``SEPARATED_TURNS`` turns or more, whether every time of one setting is below every
    time of the other: more turns would not change which median is lower."""
    return turns >= SEPARATED_TURNS and (max(times[0]) < min(times[1]) or max(times[1]) < min(times[0]))


def _session(data: bytes, threads: int) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])


_ONNX_TYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
               "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(bool)": np.bool_,
               "tensor(uint8)": np.uint8, "tensor(int8)": np.int8}


def _fed(array: np.ndarray | None, onnx_type: str) -> np.ndarray | None:
    """``array`` as the session's input type (a Python float arrives as float64); None if unknown."""
    dtype = _ONNX_TYPES.get(onnx_type)
    return None if array is None or dtype is None else np.ascontiguousarray(array, dtype=dtype)


def _array(value: Any) -> np.ndarray | None:
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor
        return value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (bool, int, float, np.generic)):
        return np.asarray(value)
    return None


__all__ = ["POOL_MACS", "on_calling_thread", "pool_threads", "time_both"]
