"""Latency measurement shared by ``dycl.check``, ``python -m dycl zoo`` and ``benchmarks/bench.py``.

Two methods, both real, answering different questions (issue 29): ``interleaved``
(input by input, contenders taking turns: what a process that also runs other code,
eager torch say, sees between calls) and ``blocks`` (each contender called on all
inputs back to back, contenders alternating block by block: what a serving loop
calling one model sees). Report both; they can differ by 2x for a model whose
runtime's threads fall asleep while another framework runs.

The interleaved method: each contender first runs ``warmup`` times on every one of the
first few inputs (allocators, thread pools and lazily built sessions settle);
then, input by input, the contenders take turns, each timed ``repeat`` times
(each turn in its own order, ``_order``), so a machine that is busy for a while
slows all of them alike. Each timed call comes right after an untimed call of the
same contender on the same input: a call right after another framework's (ONNX
Runtime after eager torch) finds its thread pool asleep, which measures the order of
the contenders, not their code. An input's time
is the best of its ``repeat`` calls (what the code costs, not what the machine
was doing); a contender's result is the median over inputs and the 25th–75th
percentiles (the spread over inputs, which take different paths, and over
noise). Calls run under ``torch.no_grad()``.

The block method: the same warm-up; then ``rounds`` rounds, in each of which every
contender in turn (each round in its own order) makes one untimed call
on the first input (its threads wake after the previous block's framework) and then
one timed call on every input in order, back to back. An input's time is the best
over rounds; the summary is the same, plus each round's own median (``Timing.rounds_ms``,
``Timing.band``): eager torch with two threads on two cores is bimodal from block to
block (``benchmarks/eager_neighbours.md``), and the band says how far one block moves.

A progress bar over the inputs goes to stderr when someone is watching
(``dycl.progress``: a terminal or Jupyter) or when asked (``progress=True``).
``noise`` says in words when a measurement is not to be trusted: the repeats of
one input disagree (the median over inputs of slowest/fastest repeat above
``REPEAT_SPREAD``: the machine was busy) or the interquartile range is wider than
``RELATIVE_IQR`` times the median (a few calls far slower than the rest).
"""

from __future__ import annotations

import math
import os
import platform
import random
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from dycl.progress import Progress

#: the median over inputs of (slowest repeat / fastest repeat) above which timings are called noisy
REPEAT_SPREAD = 2.0
#: (p75 - p25) / median above which timings are called noisy
RELATIVE_IQR = 1.0

Contender = Callable[..., Any] | Sequence[Callable[..., Any]]
"""One callable, or one callable per input (e.g. a per-path oracle)."""


@dataclass(frozen=True)
class Timing:
    """Milliseconds per call: median and interquartile range over inputs."""

    median_ms: float
    p25_ms: float
    p75_ms: float
    inputs: int
    spread: float = 1.0  # the median over inputs of slowest/fastest repeat (1.0: one repeat)
    #: by blocks: each round's own median over inputs (ms), in round order; empty when interleaved
    rounds_ms: tuple[float, ...] = ()

    def __str__(self) -> str:
        return f"{self.median_ms:.2f} ms (IQR {self.p25_ms:.2f}–{self.p75_ms:.2f})"

    def band(self) -> tuple[float, float]:
        """The lowest and highest round median (by blocks): how far one block's result moves from
        round to round. Both are the median where there were no rounds."""
        return (min(self.rounds_ms), max(self.rounds_ms)) if self.rounds_ms else (self.median_ms, self.median_ms)


def summarize(seconds: Sequence[float]) -> Timing:
    ms = sorted(s * 1000 for s in seconds)
    if len(ms) == 1:
        return Timing(ms[0], ms[0], ms[0], 1)
    p25, _, p75 = statistics.quantiles(ms, n=4, method="inclusive")
    return Timing(statistics.median(ms), p25, p75, len(ms))


def _per_input(contenders: Mapping[str, Contender], count: int) -> dict[str, list[Callable[..., Any]]]:
    return {name: list(run) if isinstance(run, Sequence) else [run] * count for name, run in contenders.items()}


def _warm_up(runs: Mapping[str, list[Callable[..., Any]]], inputs: Sequence[tuple[Any, ...]], warmup: int,
             warmup_inputs: int) -> None:
    for index, args in enumerate(inputs[:warmup_inputs]):
        for per_input in runs.values():
            for _ in range(warmup):
                per_input[index](*args)


def _order(names: list[str], turn: int) -> list[str]:
    """The contenders in the order of turn number ``turn``: a permutation drawn from a generator
    seeded by ``turn`` (the same for every run), so that over the turns each contender follows each
    other about equally often. A rotation would not do: it keeps every contender's successor, and
    the one listed after eager torch would always run while torch's threads still spin."""
    order = list(names)
    random.Random(turn).shuffle(order)
    return order


def _summaries(fastest: Mapping[str, list[float]], slowest: Mapping[str, list[float]]) -> dict[str, Timing]:
    """Per contender, the summary of its best time per input, with the median spread over inputs."""
    result = {}
    for name, best in fastest.items():
        spreads = [slow / fast if fast > 0 else 1.0 for fast, slow in zip(best, slowest[name])]
        result[name] = replace(summarize(best), spread=statistics.median(spreads) if spreads else 1.0)
    return result


def interleaved(contenders: Mapping[str, Contender], inputs: Sequence[tuple[Any, ...]], repeat: int = 3,
                warmup: int = 2, warmup_inputs: int = 3, progress: bool | None = None) -> dict[str, Timing]:
    """Time every contender on every input (argument tuples) by the interleaved method
    above; ``progress``: a bar over the inputs (None: when someone is watching)."""
    runs = _per_input(contenders, len(inputs))
    best: dict[str, list[float]] = {name: [] for name in runs}
    worst: dict[str, list[float]] = {name: [] for name in runs}
    bar = Progress(f"timing {' vs '.join(runs)}", len(inputs), progress)
    with torch.no_grad():
        _warm_up(runs, inputs, warmup, warmup_inputs)
        names = list(runs)
        for index, args in enumerate(inputs):
            fastest = dict.fromkeys(runs, math.inf)
            slowest = dict.fromkeys(runs, 0.0)
            for turn in range(repeat):
                # a contender right after eager torch finds ONNX Runtime's threads asleep
                for name in _order(names, index * repeat + turn):
                    runs[name][index](*args)  # untimed: the timed call follows this contender, not another
                    start = time.perf_counter()
                    runs[name][index](*args)
                    seconds = time.perf_counter() - start
                    fastest[name], slowest[name] = min(fastest[name], seconds), max(slowest[name], seconds)
            for name in runs:
                best[name].append(fastest[name])
                worst[name].append(slowest[name])
            bar.step(f"input {index + 1}")
    bar.close()
    return _summaries(best, worst)


def blocks(contenders: Mapping[str, Contender], inputs: Sequence[tuple[Any, ...]], rounds: int = 3,
           warmup: int = 2, warmup_inputs: int = 3, progress: bool | None = None) -> dict[str, Timing]:
    """Time every contender on every input (argument tuples) by the block method above:
    each contender called on all inputs back to back, contenders alternating block by
    block for ``rounds`` rounds; ``progress``: a bar over the blocks."""
    runs = _per_input(contenders, len(inputs))
    best = {name: [math.inf] * len(inputs) for name in runs}
    worst = {name: [0.0] * len(inputs) for name in runs}
    per_round: dict[str, list[float]] = {name: [] for name in runs}
    bar = Progress(f"timing {' vs '.join(runs)} by blocks", rounds * len(runs), progress)
    with torch.no_grad():
        _warm_up(runs, inputs, warmup, warmup_inputs)
        names = list(runs)
        for turn in range(rounds):
            for name in _order(names, turn):
                per_round[name].append(_block(runs[name], inputs, best[name], worst[name]))
                bar.step(f"round {turn + 1}: {name}")
    bar.close()
    return {name: replace(timing, rounds_ms=tuple(per_round[name])) for name, timing in
            _summaries(best, worst).items()}


def _block(per_input: list[Callable[..., Any]], inputs: Sequence[tuple[Any, ...]], best: list[float],
           worst: list[float]) -> float:
    """One contender's block: an untimed lead-in call, then every input timed, back to back.
    Returns the block's median over inputs (ms); NaN without inputs."""
    if not inputs:
        return math.nan
    per_input[0](*inputs[0])
    clock = time.perf_counter
    times = []
    for index, args in enumerate(inputs):
        start = clock()
        per_input[index](*args)
        seconds = clock() - start
        times.append(seconds)
        best[index], worst[index] = min(best[index], seconds), max(worst[index], seconds)
    return statistics.median(times) * 1000


def noise(timings: Mapping[str, Timing]) -> list[str]:
    """A sentence per contender whose timing looks disturbed (see the module docstring)."""
    found = []
    for name, timing in timings.items():
        if not math.isfinite(timing.median_ms) or timing.median_ms <= 0:
            continue
        relative = (timing.p75_ms - timing.p25_ms) / timing.median_ms
        if timing.spread > REPEAT_SPREAD:
            found.append(f"{name}: repeats of one input differ {timing.spread:.1f}x (median over inputs): the "
                         "machine was busy; timings are unreliable, rerun on a quiet machine")
        elif relative > RELATIVE_IQR:
            found.append(f"{name}: IQR {timing.p25_ms:.2f}–{timing.p75_ms:.2f} ms is {relative:.1f}x the median: "
                         "some calls were far slower than the rest; rerun on a quiet machine")
    return found


def taken() -> str:
    """When a timing was taken, to the minute, in UTC (tables state it beside ``machine()``)."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def machine() -> str:
    """The machine and thread settings a timing was taken with, in one line."""
    threads = os.environ.get("DYCL_THREADS") or str(os.cpu_count())
    return (f"{platform.machine()} ({platform.processor() or platform.system()}), {os.cpu_count()} CPUs; torch "
            f"{torch.__version__} with {torch.get_num_threads()} intra-op threads; ONNX Runtime pool of {threads} "
            "threads")


__all__ = ["Contender", "Timing", "blocks", "interleaved", "machine", "noise", "summarize", "taken"]
