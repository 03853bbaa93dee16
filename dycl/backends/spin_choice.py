"""Whether a per-sample model's thread pools spin while a run lasts: timed at compile time on
its sub-DNNs run one after another at a serving group's size, against pools that sleep.

A per-sample model's sub-DNNs (``dycl.per_sample.group_onnx``) take a group of samples in a
leading dim; at batch 32 a group holds tens of samples, and a pool whose threads spin between
the tasks of one run, instead of sleeping and being woken for each
(``session.intra_op.allow_spinning=1``), may pay: on the quiet 2-core machine (session 30),
``DYCL_ORT_SPIN=run`` took sdn_vgg19 at batch 32 from 0.72 to 0.91 of the static network,
caption_googlenet from 0.57 to 0.71, and blockdrop from 0.64 down to 0.59. On the shared machine
with another process on one core it made sdn_vgg19's batch 4.5x slower
(``benchmarks/batch_levers.py``). So it is timed, on the machine that compiles.

Note: why the sub-DNNs are timed as a chain. Timed one graph at a time (its sessions in turns
on its own example), sdn_vgg19's 7 graphs measured spinning within 0.8-1.1x of sleeping, and a
15% margin chose spinning for 4 of them by noise; that artifact's batches then took 1.4x as
long as with no spinning (``batch_levers.py --env DYCL_ORT_SPIN=off``, shared machine,
2026-11-28). What a graph's spinning costs shows when other sessions run next to it, so the
choice times what a batch does: every graph once, in order, each with its pool, one chain with
sleeping pools and one with spinning pools in turns, and takes the spinning one for the whole
model only where its median beats the other's by more than ``SPIN_MARGIN`` (a near tie goes to
sleeping, which leaves the core to the rest of the process). Graphs of one structure
(``graph_structure``: BlockDrop's residual blocks of one stage) cost the same, so the chains make
one session per structure and run it once for each of its graphs (blockdrop: the choice took 7.5 s
of a 19 s compile with a session per graph).

Spinning stops when a run returns (``session.force_spinning_stop=1``): no one else in the process
pays after a run. Assumes: each graph is a grouped per-sample graph (an input that carries the
sample has one more leading dim than the example's value) and the machine (and load) that
compiles is the one that serves, as ``thread_choice`` does. Guarantees: the answer only changes
how the sessions' pools wait for work, never what they compute; with fewer than two pool
threads, no graph that can be timed, or a session or run that fails, the answer is no.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from dycl.backends.graph_structure import structure_key
from dycl.backends.thread_choice import _array, _fed, pool_threads

#: the group size the chain is timed at: a batch of 32 samples, before any leaves
GROUP_ROWS = 32
#: timed turns per setting at most, the seconds the timing may take (past ``SEPARATED_TURNS``
#: turns), and the turns after which two settings whose times do not overlap are settled
TIMED_RUNS = 7
TIMING_BUDGET_S = 0.5
SEPARATED_TURNS = 2
#: spinning is chosen only where its median beats sleeping's by more than this share
SPIN_MARGIN = 0.15


def spinning_pays(graphs: Sequence[tuple[bytes, Mapping[str, Any], bool]], threads: int | None = None) -> bool:
    """Whether the pools of ``graphs`` (each an ONNX graph, one sample's inputs by name and whether it
    runs on the calling thread, in program order) should spin while a run lasts (module docstring)."""
    threads = pool_threads() if threads is None else threads
    if threads <= 1 or all(on_caller for *_, on_caller in graphs):  # no pool: nothing to spin
        return False
    fed = [(data, feeds, 1 if on_caller else threads) for data, feeds, on_caller in
           ((data, group_feeds(data, example), on_caller) for data, example, on_caller in graphs) if feeds is not None]
    timed = _time_chains(_by_structure(fed)) if fed else None
    return timed is not None and timed[1] * (1 + SPIN_MARGIN) < timed[0]


def _by_structure(fed: Sequence[_Fed]) -> list[_Fed]:
    """``fed`` with each graph replaced by the first of its structure and threads (the same bytes
    object, so ``_chain`` makes one session for them), feeds kept."""
    first: dict[str, bytes] = {}
    chain = []
    for data, feeds, threads in fed:
        shapes = {name: array.shape for name, array in feeds.items()}
        key = f"{threads}:{structure_key(onnx.load_model_from_string(data), shapes)}"
        chain.append((first.setdefault(key, data), feeds, threads))
    return chain


def group_feeds(data: bytes, example: Mapping[str, Any]) -> dict[str, np.ndarray] | None:
    """The graph's feeds for a group of ``GROUP_ROWS`` copies of the example's sample (an input
    with one more dim than the example's value is per sample; others are fed as they are);
    None where an input is missing or of a type not fed here."""
    graph = onnx.load_model_from_string(data).graph
    initializers = {tensor.name for tensor in graph.initializer}
    feeds = {}
    for value in graph.input:
        if value.name in initializers:
            continue
        array = _array(example.get(value.name))
        type_name = _TYPE_NAMES.get(value.type.tensor_type.elem_type)
        if array is None or type_name is None:
            return None
        if len(value.type.tensor_type.shape.dim) == array.ndim + 1:
            array = np.repeat(array[None], GROUP_ROWS, axis=0)
        feeds[value.name] = _fed(array, f"tensor({type_name})")
    return feeds


#: a graph, its feeds at a group's size and the intra-op threads its session gets
_Fed = tuple[bytes, dict[str, np.ndarray], int]

_TYPE_NAMES = {onnx.TensorProto.FLOAT: "float", onnx.TensorProto.DOUBLE: "double", onnx.TensorProto.FLOAT16: "float16",
               onnx.TensorProto.INT64: "int64", onnx.TensorProto.INT32: "int32", onnx.TensorProto.BOOL: "bool",
               onnx.TensorProto.UINT8: "uint8", onnx.TensorProto.INT8: "int8"}


def _time_chains(fed: Sequence[_Fed]) -> tuple[float, float] | None:
    """Median seconds of the chain (every graph run once, in order) on sleeping pools and on
    spinning ones, the two chains taking turns; None where a session or run fails."""
    try:
        chains = [_chain(fed, spin) for spin in (False, True)]
        for chain in chains:
            _run(chain)  # the first runs allocate
    except Exception:  # noqa: BLE001 - an untimeable chain does not spin (the sound default)
        return None
    times: tuple[list[float], list[float]] = ([], [])
    deadline = time.perf_counter() + TIMING_BUDGET_S
    for turn in range(TIMED_RUNS):
        for index in (0, 1) if turn % 2 == 0 else (1, 0):
            times[index].append(_run(chains[index]))
        if turn + 1 >= SEPARATED_TURNS and (time.perf_counter() > deadline or _separated(times)):
            break
    return statistics.median(times[0]), statistics.median(times[1])


def _separated(times: tuple[list[float], list[float]]) -> bool:
    """Whether every time of one setting is below every time of the other (more turns would not
    change which median is lower)."""
    return max(times[0]) < min(times[1]) or max(times[1]) < min(times[0])


def _chain(fed: Sequence[_Fed], spin: bool) -> list[tuple[ort.InferenceSession, dict[str, np.ndarray]]]:
    """A session for each graph of ``fed``, one per bytes object (``_by_structure``), with its feeds."""
    made: dict[int, ort.InferenceSession] = {}
    for data, _, threads in fed:
        if id(data) not in made:
            made[id(data)] = _session(data, threads, spin)
    return [(made[id(data)], feeds) for data, feeds, _ in fed]


def _run(chain: Sequence[tuple[ort.InferenceSession, dict[str, np.ndarray]]]) -> float:
    start = time.perf_counter()
    for session, feeds in chain:
        session.run(None, feeds)
    return time.perf_counter() - start


def _session(data: bytes, threads: int, spin: bool) -> ort.InferenceSession:
    """A session as the host makes it (``ort_runtime.session_options_for``), spinning within runs or not."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    spin = spin and threads > 1  # a session on the calling thread has no pool to spin
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    if spin:
        options.add_session_config_entry("session.force_spinning_stop", "1")
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])


__all__ = ["GROUP_ROWS", "SPIN_MARGIN", "group_feeds", "spinning_pays"]
