"""``Levers(single_graph="auto")``'s decision: the host calling each sub-DNN, or the whole graph
as one ONNX model (``dycl.backends.single_graph_stage``), by timing both side by side.

What is timed: both emitted hosts (``dycl.artifact.host_model``, what ``dycl.load`` runs) on the
example and on the inputs ``dycl.harness.self_check_inputs`` derives from it at the example's
sizes (negated, scaled, reshuffled, random with its statistics), so that the time is not only
the example's path: the derived inputs are chosen to take other paths, and on BlockDrop or
SkipNet they do. An input either host raises on is left out (the self-check says why later).

How: by blocks, as ``dycl.harness.timing.blocks`` times a serving loop: ``ROUNDS`` rounds at most
(``MIN_ROUNDS`` at least, then until ``BUDGET_S`` seconds of timing), each running every input
back to back through one host, then through the other, the order alternating between rounds.
Each host's cost is the sum over the inputs of each input's best run: on a loaded machine a
run that waits for a thread pool's wake-up or a CPU slice costs several times its work
(caption_resnext's host measured 0.7 to 1.7 ms per input in medians of rounds, in one process),
and the best of several runs is what the work itself costs. The one graph is kept only where
its cost is below ``1 - MARGIN`` times the host's. Otherwise the host stays: it is the design's
form (a sub-DNN per session, coverage by host condition), and within the margin neither is
better.

Assumes: compile runs on the machine, and under the load, the model will serve on (as
``dycl.backends.thread_choice`` does). Guarantees: the decision only picks between two hosts
that compute the same values (each checked by the self-check); ``Choice`` records the
medians and the ratio, and a timing that fails keeps the host."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

#: rounds of timing: at least MIN_ROUNDS, at most ROUNDS, past MIN_ROUNDS only within BUDGET_S seconds
MIN_ROUNDS, ROUNDS, BUDGET_S = 5, 15, 0.6
#: the one graph must be this much faster (median ratio) to replace the host
MARGIN = 0.03


@dataclass(frozen=True)
class Choice:
    """``single_graph``: whether the one graph is kept; each host's µs per input (best runs), the
    one graph's cost over the host's, how many rounds and inputs were timed."""

    single_graph: bool
    host_us: float
    single_graph_us: float
    ratio: float
    rounds: int
    inputs: int

    def stats(self) -> dict[str, Any]:
        return {"host_us": round(self.host_us, 1), "single_graph_us": round(self.single_graph_us, 1),
                "ratio": round(self.ratio, 3), "timed_rounds": self.rounds, "timed_inputs": self.inputs}


def timing_inputs(example_args: Sequence[Any]) -> list[tuple]:
    """The example and its derived inputs at the example's sizes, as numpy arguments."""
    from dycl.harness.self_check_inputs import derived_inputs

    found = []
    for derived in derived_inputs(tuple(example_args), {}, {}):
        found.append(tuple(value.numpy() if hasattr(value, "numpy") else value for value in derived.args))
    return found


def choose(host: Callable[..., Any], single: Callable[..., Any], inputs: Sequence[tuple]) -> Choice:
    """Time ``host`` and ``single`` (models on numpy arguments) on ``inputs`` (module docstring);
    raises what the example's run raises."""
    kept = [args for position, args in enumerate(inputs) if _runs(host, single, args, position == 0)]
    models = (host, single)
    times: list[list[list[float]]] = [[[] for _ in kept], [[] for _ in kept]]  # model, input, round
    rounds = 0
    start = time.perf_counter()
    while rounds < ROUNDS and (rounds < MIN_ROUNDS or time.perf_counter() - start < BUDGET_S):
        for position in ((0, 1) if rounds % 2 == 0 else (1, 0)):
            _block(models[position], kept, times[position])
        rounds += 1
    best = [sum(min(runs) for runs in per_input) for per_input in times]
    ratio = best[1] / best[0]
    return Choice(ratio < 1.0 - MARGIN, best[0] / len(kept) * 1e6, best[1] / len(kept) * 1e6, ratio, rounds,
                  len(kept))


def _runs(host: Callable[..., Any], single: Callable[..., Any], args: tuple, required: bool) -> bool:
    """Whether both run on ``args`` (also their first, untimed, runs); the example must."""
    try:
        host(*args)
        single(*args)
    except Exception:  # noqa: BLE001 - a derived input outside the model's domain is not timed
        if required:
            raise
        return False
    return True


def _block(model: Callable[..., Any], inputs: Sequence[tuple], times: list[list[float]]) -> None:
    """Run ``model`` on every input back to back, each run's seconds appended to its input's list."""
    for args, runs in zip(inputs, times):
        start = time.perf_counter()
        model(*args)
        runs.append(time.perf_counter() - start)


__all__ = ["BUDGET_S", "MARGIN", "MIN_ROUNDS", "ROUNDS", "Choice", "choose", "timing_inputs"]
