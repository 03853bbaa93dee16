"""``Levers(single_graph="auto")``'s decision: the host calling each sub-DNN, or the whole graph
as one ONNX model (``dycl.backends.single_graph_stage``), by timing them side by side.

The candidates: the host, and the one graph run on the calling thread and in a thread pool
(which of these pays depends on the machine and its load as much as on the graph:
``dycl.backends.thread_choice``), each as its emitted host (``dycl.artifact.host_model``, what
``dycl.load`` runs).

The inputs: the example, those ``dycl.harness.self_check_inputs`` derives from it at its sizes
(negated, scaled, reshuffled, random with its statistics), and those the self-check's branch
search (``dycl.harness.self_check_search``) finds on the host form for the outcomes of its
conditions the others leave unreached: the time is the explored paths', not only the example's.
An input a candidate raises on is left out (the self-check says why).

How: by blocks, as ``dycl.harness.timing.blocks`` times a serving loop: ``MIN_ROUNDS`` to
``ROUNDS`` rounds (past ``MIN_ROUNDS`` only within ``BUDGET_S`` seconds), each running every
input back to back through each candidate in turn, the order reversed every other round, each
block after one untimed lead-in call. A candidate's cost is the sum over the inputs of each
input's lower quartile of runs. Not the mean or the median: on a loaded machine a run that waits
for a CPU slice costs several times its work (caption_resnext's host measured 0.7 to 1.7 ms per
input as medians of rounds, 0.36 as best runs, in one process). Not the best run either: a thread
pool's best run, both threads awake at once, is rarer than its calling-thread twin's (skipnet_rnn's
one graph in a pool had the better best run, 668 against 736 µs, and was 1.3x slower by blocks).

Note: why each block starts with an untimed call. The first run after another candidate's block
finds the caches holding that candidate's weights. The order reverses every other round, so the
first and last candidates follow themselves every other round, but the middle one (the one graph
on the calling thread) always follows another: without the lead-in, caption_googlenet's one graph
measured 2.3x its steady time on the block's first input, which alone made the choice keep the
host, slower by 3-7% on the zoo's inputs (2026-11-28, shared machine). A serving loop calls one
model back to back; so does the bench's block method (``dycl.harness.timing.blocks``).

The pick: the candidates in ``preference`` order, the first kept unless a later one costs less than
``1 - MARGIN`` times the one kept so far. The compiler prefers the one graph on the calling thread,
then in a pool, then the host: the fewer boundaries and threads, the less a loaded machine can
add to a call, and within the margin the timing cannot tell them apart. In the bench's table by
blocks (``benchmarks/results.md``, 2026-11-28 10:55 UTC), the one graph ("on") against the host
("off") was 0.83-1.02x on 10 of 11 zoo models (0.84 sdn_wrn32_4, 0.83 blockdrop) and 1.14x on
translation, whose host the timing still keeps where it wins by the margin.

Where the choice cannot matter it is not timed, nor the graph lowered (``untimed``): the host
stays for a graph of one sub-DNN and no condition (the one graph would be that sub-DNN), and for a
tiny model, at most ``TINY_MACS`` multiply-accumulates over all its sub-DNNs at the example
(``dycl.backends.onnx_cost``; about 0.1 ms of work on one core): there a call costs some tens of
microseconds in either form, while lowering, emitting and timing three forms cost a compile
about half a second (the test suite compiles hundreds of such models). ``single_graph="on"``
lowers them all the same. An unknown count (a shape from data, a graph with loops) is timed.

Assumes: compile runs on the machine, and under the load, the model will serve on (as
``dycl.backends.thread_choice`` does). Guarantees: the decision only picks among forms that
compute the same values (the self-check compares the one kept with eager); ``Choice`` records
each candidate's cost; a timing that fails keeps the host (``single_graph_stage``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dycl.backends.onnx_cost import macs

#: rounds of timing: at least MIN_ROUNDS, at most ROUNDS, past MIN_ROUNDS only within BUDGET_S seconds
MIN_ROUNDS, ROUNDS, BUDGET_S = 5, 40, 0.3
#: a less preferred candidate must cost this much less than the one kept (lower quartiles of runs) to replace it
MARGIN = 0.03
#: at most this many MACs over all sub-DNNs at the example: "auto" keeps the host untimed
TINY_MACS = 1_000_000


@dataclass(frozen=True)
class Choice:
    """``kept``: the index of the candidate kept (the most preferred unless another is clearly faster);
    ``us``: each candidate's µs per input (lower quartile of runs); how many rounds and inputs were timed.
    The stats name candidate 0 the host and the others forms of the one graph."""

    kept: int
    us: tuple[float, ...]
    rounds: int
    inputs: int

    @property
    def fastest_other(self) -> int:
        """The fastest candidate other than the host."""
        return min(range(1, len(self.us)), key=lambda index: self.us[index])

    def stats(self) -> dict[str, Any]:
        other = self.fastest_other
        return {"host_us": round(self.us[0], 1), "single_graph_us": round(self.us[other], 1),
                "ratio": round(self.us[other] / self.us[0], 3), "timed_rounds": self.rounds,
                "timed_inputs": self.inputs}


def untimed(sub_dnns: int, conditions: int,
            graphs: Sequence[tuple[bytes, Mapping[str, tuple[int, ...]]]]) -> str | None:
    """Why "auto" keeps the host without lowering or timing (module docstring), or None: a graph of
    ``sub_dnns`` sub-DNNs and ``conditions`` conditions whose ONNX ``graphs`` (one per sub-DNN, with
    its input shapes at the example) are given."""
    if sub_dnns <= 1 and not conditions:
        return "one sub-DNN and no condition: the one graph would be that sub-DNN"
    total = 0
    for data, shapes in graphs:
        cost = macs(data, shapes)
        if cost is None:
            return None
        total += cost
    if total <= TINY_MACS:
        return f"a tiny model ({total} MACs at the example, at most {TINY_MACS}): either form costs microseconds"
    return None


def timing_inputs(example_args: Sequence[Any], host: Callable[..., Any] | None = None,
                  program: Any = None) -> list[tuple]:
    """The example, its derived inputs at its sizes and, where the host form (a model on numpy
    arguments) and its emitted ``program`` (``dycl.hostgen.program.HostProgram``) are given, the
    inputs the self-check's branch search finds for the outcomes of its conditions those leave
    unreached; as numpy arguments."""
    from dycl.harness.coverage import HostCoverage
    from dycl.harness.self_check_inputs import derived_inputs
    from dycl.harness.self_check_search import BranchSearch

    found = [derived for derived in derived_inputs(tuple(example_args), {}, {}) if not derived.kwargs]
    if host is not None and program is not None and program.condition_count:
        search = BranchSearch(HostCoverage(host, program), lambda *args: host(*(_array(a) for a in args)))
        for derived in found:
            search.note(derived)
        found += list(search.candidates(found[0]))
    return [tuple(_array(value) for value in derived.args) for derived in found]


def _array(value: Any) -> Any:
    return value.numpy() if hasattr(value, "numpy") else value


def choose(candidates: Sequence[Callable[..., Any]], inputs: Sequence[tuple],
           preference: Sequence[int] | None = None) -> Choice:
    """Time ``candidates`` (models on numpy arguments; the host first, then forms of the one
    graph) on ``inputs`` and keep one by ``preference`` (indices, most preferred first; default:
    their order) and the margin (module docstring); raises what the example's run raises."""
    kept = [args for position, args in enumerate(inputs) if _runs(candidates, args, position == 0)]
    times = [[[] for _ in kept] for _ in candidates]  # candidate, input, round
    rounds = 0
    start = time.perf_counter()
    while rounds < ROUNDS and (rounds < MIN_ROUNDS or time.perf_counter() - start < BUDGET_S):
        order = range(len(candidates)) if rounds % 2 == 0 else reversed(range(len(candidates)))
        for position in order:
            _block(candidates[position], kept, times[position])
        rounds += 1
    us = tuple(sum(_lower_quartile(runs) for runs in per_input) / len(kept) * 1e6 for per_input in times)
    return Choice(pick(us, preference), us, rounds, len(kept))


def pick(us: Sequence[float], preference: Sequence[int] | None = None) -> int:
    """The index kept among candidates costing ``us``: the first of ``preference``, replaced by each
    later one that costs less than ``1 - MARGIN`` times the one kept so far."""
    order = list(range(len(us)) if preference is None else preference)
    if sorted(order) != list(range(len(us))):
        raise ValueError(f"preference must order every candidate once, got {order} for {len(us)}")
    kept = order[0]
    for index in order[1:]:
        if us[index] < (1.0 - MARGIN) * us[kept]:
            kept = index
    return kept


def _runs(candidates: Sequence[Callable[..., Any]], args: tuple, required: bool) -> bool:
    """Whether every candidate runs on ``args`` (also their first, untimed, runs); the example must."""
    try:
        for model in candidates:
            model(*args)
    except Exception:  # noqa: BLE001 - a derived input outside the model's domain is not timed
        if required:
            raise
        return False
    return True


def _lower_quartile(runs: list[float]) -> float:
    return sorted(runs)[len(runs) // 4]


def _block(model: Callable[..., Any], inputs: Sequence[tuple], times: list[list[float]]) -> None:
    """Run ``model`` on every input back to back after an untimed lead-in call (note above), each
    run's seconds appended to its input's list."""
    model(*inputs[0])
    for args, runs in zip(inputs, times):
        start = time.perf_counter()
        model(*args)
        runs.append(time.perf_counter() - start)


__all__ = ["BUDGET_S", "MARGIN", "MIN_ROUNDS", "ROUNDS", "TINY_MACS", "Choice", "choose", "pick", "timing_inputs",
           "untimed"]
