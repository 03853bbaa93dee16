"""More inputs for the self-check, chosen by the branches they reach: a check that does not depend
on knowing the construct a branch comes from.

The fixed derived inputs (``dycl.harness.self_check_inputs``) stay near the example: a branch that
none of them reaches is compiled but never compared with eager, and a wrong answer there is silent
(the fuzzer found an argument updated in place only on a branch the example's neighbours did not
take). ``BranchSearch`` records which outcome of every host condition the compared inputs took
(``dycl.harness.coverage.HostCoverage``), then draws candidates further away — random values with
each floating tensor's own statistics at other scales, the example shifted by multiples of its
spread, its magnitudes with either sign — runs the compiled model alone on each, and yields those
that reach an outcome no input took before, for the self-check to compare with eager.

Assumes: ``compiled`` runs an in-process host (``CompiledModel``) whose emitted method
``HostCoverage`` can record; ``stateful`` (if given) is the model whose state the compiled model
writes back, which is put back after every probe. Guarantees: at most ``BUDGET`` probes (the
compiled model only, on fresh copies), deterministic (a private generator with a fixed seed), the
example's tensors never handed out; integer and boolean tensors keep their values (reshuffled).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch

from dycl.harness.coverage import HostCoverage
from dycl.harness.self_check_inputs import Derived, _map_tensors, _shuffled
from dycl.model.example_copy import copy_tensors
from dycl.model.model_state import ModelSnapshot

#: the most candidates run on the compiled model alone, per compile
BUDGET = 16
_SEED = 20261127
_SCALES = (10.0, 0.1, 30.0, 0.03, 3.0, 0.3)
_SHIFTS = (3.0, -3.0, 10.0, -10.0)

Outcome = tuple[int, bool]


class BranchSearch:
    """The outcomes the compared inputs reached, and candidates that reach others."""

    def __init__(self, coverage: HostCoverage, compiled: Callable[..., Any],
                 stateful: torch.nn.Module | None = None) -> None:
        self.coverage = coverage
        self.compiled = compiled
        self.stateful = stateful
        self.outcomes = {(site.number, taken) for site in coverage.sites for taken in (True, False)}
        self.seen: set[Outcome] = set()

    def note(self, derived: Derived) -> None:
        """Record the outcomes ``derived`` (an input already compared) reaches."""
        self.seen |= self._reached(derived)

    def candidates(self, example: Derived) -> Iterator[Derived]:
        """Inputs drawn from ``example`` that reach an outcome not seen yet, until none is left
        unseen or ``BUDGET`` probes are spent."""
        generator = torch.Generator().manual_seed(_SEED)
        for number, (description, change) in enumerate(_draws(generator)):
            if number >= BUDGET or self.outcomes <= self.seen:
                return
            mapped = _map_tensors((example.args, example.kwargs), change)
            if mapped is None:
                continue
            derived = Derived(description, *mapped)
            reached = self._reached(derived)
            if reached - self.seen:
                self.seen |= reached
                yield derived

    def _reached(self, derived: Derived) -> set[Outcome]:
        before = ModelSnapshot.take(self.stateful) if self.stateful is not None else None
        args, kwargs = copy_tensors((derived.args, derived.kwargs))
        try:
            with torch.no_grad():
                _, trace = self.coverage.record(self.compiled, *args, **kwargs)
        except Exception:  # noqa: BLE001 - an input the compiled model refuses reaches nothing new here;
            return set()  # the comparison of the inputs it does take says whether it is right
        finally:
            if before is not None:
                before.restore()
        return set(trace.outcomes)


def _draws(generator: torch.Generator) -> Iterator[tuple[str, Callable[[torch.Tensor], torch.Tensor]]]:
    """``(description, change of one tensor)``, scales and shifts in turn, then the signs of the magnitudes."""
    for scale, shift in zip(_SCALES, _SHIFTS + (0.0,) * len(_SCALES)):
        yield (f"random input with the example's mean and {scale:g} times its spread",
               _floats(lambda t, scale=scale: _random_like(t, generator, scale)))
        if shift:
            yield (f"example shifted by {shift:g} times its spread",
                   _floats(lambda t, shift=shift: t + shift * _spread(t)))
    yield "example's magnitudes", _floats(torch.abs)
    yield "example's magnitudes negated", _floats(lambda t: -t.abs())
    while True:
        for scale in _SCALES:
            yield (f"random input with the example's mean and {scale:g} times its spread",
                   _floats(lambda t, scale=scale: _random_like(t, generator, scale)))


def _floats(change: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
    """``change`` on floating tensors; other tensors reshuffled (their values kept as a set)."""
    generator = torch.Generator().manual_seed(_SEED + 1)
    return lambda tensor: change(tensor) if tensor.is_floating_point() else _shuffled(tensor, generator)


def _spread(tensor: torch.Tensor) -> float:
    spread = float(tensor.double().std().nan_to_num(0.0)) if tensor.numel() > 1 else 0.0
    return spread or 1.0


def _random_like(tensor: torch.Tensor, generator: torch.Generator, scale: float) -> torch.Tensor:
    if tensor.numel() == 0:
        return tensor.clone()
    mean = float(tensor.double().mean().nan_to_num(0.0))
    noise = torch.randn(tensor.shape, generator=generator, dtype=torch.float64)
    return (mean + scale * _spread(tensor) * noise).to(tensor.dtype)


def branch_search(compiled: Any, stateful: torch.nn.Module | None) -> BranchSearch | None:
    """The search for an in-process ``CompiledModel`` compiled in this process (a per-sample host too:
    ``HostCoverage`` records its interleaved generators); None where its host cannot be recorded (a
    loaded artifact)."""
    result = getattr(compiled, "_result", None)
    if result is None or result.program is None or not result.program.condition_count:
        return None
    try:
        coverage = HostCoverage(compiled._host, result.program)
    except (ValueError, AttributeError):
        return None
    return BranchSearch(coverage, compiled, stateful)


__all__ = ["BUDGET", "BranchSearch", "branch_search"]
