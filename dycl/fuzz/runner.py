"""Check one program: run it eagerly, compile it per backend, compare, classify.

Statuses per backend: ``ok``, ``inconsistent`` (some output differs from eager,
or compiling changed the model: its ``state_dict`` values, a ``training`` flag or a
plain attribute, see :mod:`dycl.fuzz.state`), ``error`` (dycl raised while
compiling or running the compiled model, or took longer than the time limit) and
``unsupported`` (``dycl.UnsupportedError``; for a model left in train mode also a
``ValueError`` that tells the user to call ``eval()``; while running, an input the compiled model
refuses by its sizes, naming the static dim or the guard: ``input_refused``). Every call gets its own copy of its
input, and the copy as the call left it is compared too (a ``forward`` that changes its argument
in place), as is the example after compiling; a program that samples (feature ``sampling``) has
only its crashes and refusals compared, not its values. After the random inputs come the special-valued
ones of :mod:`dycl.fuzz.special` (NaN, infinities, zeros, ties, huge values) that eager runs on: their
outputs may be non-finite (NaN equals NaN) and are compared with a relative tolerance too.

Models may carry state between calls (buffers updated in place, containers on
``self``), so eager and every backend each start from their own deep copy of the
freshly built model and see the inputs in the same order: the compiled model's
*i*-th output must equal eager's *i*-th, state included. A program that fails
eagerly, or whose outputs are not finite or too large to compare with an
absolute tolerance, raises :class:`Discarded`.
"""

from __future__ import annotations

import copy
import math
import re
import signal
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

import dycl
from dycl.fuzz.features import program_features
from dycl.fuzz.loader import build_model, forget, import_file, make_inputs, write_program
from dycl.fuzz.program import Program
from dycl.fuzz.special import SPECIAL_RTOL, special_inputs
from dycl.fuzz.state import ModelState
from dycl.harness.paths import model_source_files, record_path
from dycl.harness.testing import outputs_match

ATOL = {"torch": 1e-5, "onnxruntime": 1e-4}
N_INPUTS = 20
MAX_MAGNITUDE = 1e3
STATUS_ORDER = ["ok", "unsupported", "error", "inconsistent"]

CompileFn = Callable[..., Callable[..., Any]]


class Discarded(Exception):
    """The program cannot serve as a test: it fails eagerly or its outputs are unusable."""


class CompileTimeout(Exception):
    """Compiling took longer than the time limit."""


@dataclass
class Outcome:
    """The result on one backend."""

    backend: str
    status: str
    detail: str = ""
    failing: list[int] = field(default_factory=list)  # indices of inputs that differ
    error_type: str = ""
    phase: str = ""  # "compile" or "run" for errors; "compile" for an inconsistency if compiling changed the model
    seconds: float = 0.0
    reason: str = ""  # for a refusal: the construct refused, without names and numbers (see refusal_reason)

    def signature(self) -> tuple[str, ...]:
        """What "fails the same way" means for the shrinker."""
        if self.status == "error":
            return (self.status, self.backend, self.error_type, self.phase)
        if self.status == "inconsistent" and self.phase == "compile":
            return (self.status, self.backend, "changed the model")
        return (self.status, self.backend)


@dataclass
class Checked:
    """The result of one program on all requested backends."""

    program: Program
    file: Path
    paths: int
    outcomes: list[Outcome]
    eager_seconds: float = 0.0
    inputs: list[torch.Tensor] = field(default_factory=list)  # in the order checked; inputs[0] the example
    special_from: int | None = None  # the index of the first special-valued input (if any)

    @property
    def status(self) -> str:
        return max((o.status for o in self.outcomes), key=STATUS_ORDER.index, default="ok")

    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status != "ok"]


@contextmanager
def time_limit(seconds: float | None):
    """Raise :class:`CompileTimeout` in the block after ``seconds`` (main thread only; else no limit)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum, frame):
        raise CompileTimeout(f"compiling took longer than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _check_finite(value: Any) -> None:
    if isinstance(value, torch.Tensor):
        if not torch.isfinite(value).all() or value.abs().max() > MAX_MAGNITUDE:
            raise Discarded("output not finite or too large")
    elif isinstance(value, float):
        if not math.isfinite(value) or abs(value) > MAX_MAGNITUDE:
            raise Discarded("output not finite or too large")
    elif isinstance(value, (tuple, list)):
        for item in value:
            _check_finite(item)


def run_eager(model: torch.nn.Module, inputs: Sequence[torch.Tensor],
              after: list[torch.Tensor] | None = None, special_from: int | None = None) -> tuple[list[Any], int]:
    """Eager outputs on every input and the number of distinct eager paths; :class:`Discarded` on failure.
    Each call gets a copy of its input; ``after`` (if given) receives each copy as the call left it.
    Inputs from index ``special_from`` on are special-valued (:mod:`dycl.fuzz.special`): their outputs
    may be NaN, infinite or large."""
    files = model_source_files(model)
    outputs, paths = [], set()
    with torch.no_grad():
        for i, x in enumerate(inputs):
            x = x.clone()
            try:
                result, path = record_path(model, x, files=files)
            except Exception as exc:  # noqa: BLE001 - any eager failure discards the program
                raise Discarded(f"eager: {type(exc).__name__}: {exc}") from exc
            if special_from is None or i < special_from:
                _check_finite(result)
            outputs.append(result)
            paths.add(path)
            if after is not None:
                after.append(x)
    return outputs, len(paths)


def eager_runnable(model: torch.nn.Module, inputs: Sequence[torch.Tensor],
                   candidates: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The ``candidates`` that eager runs on without raising (``int()`` of a NaN does), each called on a
    copy of ``model`` in the state ``inputs`` and the candidates kept before it left it."""
    probe = copy.deepcopy(model)
    kept: list[torch.Tensor] = []
    with torch.no_grad():
        try:
            for x in inputs:
                probe(x.clone())
        except Exception:  # noqa: BLE001 - run_eager discards the program
            return []
        for x in candidates:
            trial = copy.deepcopy(probe)
            try:
                trial(x.clone())
            except Exception:  # noqa: BLE001 - eager's own failure: nothing to compare on this input
                continue
            probe = trial
            kept.append(x)
    return kept


def refused(exc: Exception, training: bool) -> bool:
    """Whether ``exc`` is dycl declining to compile a model: an ``UnsupportedError``, or, for a model
    with a submodule in train mode (``training``), a ``ValueError`` that points the user at ``eval()``."""
    if isinstance(exc, dycl.UnsupportedError):
        return True
    return training and isinstance(exc, ValueError) and "eval" in str(exc)


TRAINING_REASON = "a model in training mode"


def refusal_reason(exc: Exception) -> str:
    """The bucket a refusal counts in: the construct an ``UnsupportedError`` names with quoted and
    back-quoted names, parenthesised details and numbers blanked (``TRAINING_REASON`` for the
    train-mode ``ValueError`` and refusal), so that refusals of one cause share one reason."""
    construct = getattr(exc, "construct", None)
    if not isinstance(construct, str):
        return TRAINING_REASON if "eval" in str(exc) else type(exc).__name__
    text, previous = construct, None
    while text != previous:  # innermost parentheses first: (chosen = self.heads(x_1))
        text, previous = re.sub(r"\([^()]*\)", "", text), text
    text = re.sub(r"`[^`]*`|'[^']*'|\"[^\"]*\"", "_", text)
    text = re.sub(r"\b[\w.<>]*(?:Fuzz_s|dycl_fuzzlib)[\w.<>]*", "_", text)
    text = re.sub(r"\d+", "N", text)
    text = " ".join(text.split())
    return TRAINING_REASON if text.startswith(TRAINING_REASON) else text


def check_backend(model: torch.nn.Module, inputs: Sequence[torch.Tensor], expected: Sequence[Any], backend: str,
                  compile_fn: CompileFn = dycl.compile, timeout: float | None = None,
                  atol: float | None = None, expected_inputs: Sequence[torch.Tensor] | None = None,
                  compare_values: bool = True, special_from: int | None = None) -> Outcome:
    """Compile ``model`` for ``inputs[0]`` on ``backend``, check that compiling left the model and the
    example as they were, and compare the compiled model with ``expected`` on every input, called in
    order (``model`` must be in the state eager started from; it is compiled and then left alone), and
    each input as the call left it with ``expected_inputs`` (where given). ``compare_values=False`` (a
    program that samples) compares only that every call runs. ``atol``: default ``ATOL``; inputs from
    index ``special_from`` on (special values) are compared with the relative tolerance ``SPECIAL_RTOL`` too."""
    start = time.perf_counter()
    before = ModelState.of(model)
    training = any(before.training.values())
    example = inputs[0].clone()
    try:
        with time_limit(timeout):
            compiled = compile_fn(model, example, backend=backend)
    except Exception as exc:  # noqa: BLE001 - any exception but a refusal is a compiler error
        changed = before.difference(ModelState.of(model))
        if changed:  # a refusal, too, must leave the model as it was
            return Outcome(backend, "inconsistent", f"compiling ({type(exc).__name__}) changed the model: {changed}",
                           phase="compile", seconds=time.perf_counter() - start)
        kind = "unsupported" if refused(exc, training) else "error"
        detail = str(exc) if kind == "unsupported" else f"{type(exc).__name__}: {exc}"
        return Outcome(backend, kind, detail, error_type=type(exc).__name__, phase="compile",
                       seconds=time.perf_counter() - start, reason=refusal_reason(exc) if kind == "unsupported" else "")
    changed = before.difference(ModelState.of(model))
    if not changed and not torch.equal(example, inputs[0]):
        changed = "the example input (an argument forward changes in place)"
    if changed:
        return Outcome(backend, "inconsistent", f"compiling changed the model: {changed}", phase="compile",
                       seconds=time.perf_counter() - start)
    return compare_calls(compiled, inputs, expected, backend, start, atol, expected_inputs, compare_values,
                         special_from)


def compare_calls(compiled: Callable[..., Any], inputs: Sequence[torch.Tensor], expected: Sequence[Any],
                  backend: str, start: float, atol: float | None = None,
                  expected_inputs: Sequence[torch.Tensor] | None = None, compare_values: bool = True,
                  special_from: int | None = None) -> Outcome:
    """Call ``compiled`` on each of ``inputs`` in order and compare with ``expected`` (see
    ``check_backend``). An input the compiled model refuses by its shape (``input_refused``) ends the
    calls as a refusal, unless an earlier output already differed: later calls would start from
    state the refused call did not update."""
    failing, first = [], ""
    for i, x in enumerate(inputs):
        x = x.clone()
        try:
            with torch.no_grad():
                actual = compiled(x)
        except Exception as exc:  # noqa: BLE001 - the compiled model must not raise
            if input_refused(exc) and failing:
                break
            if input_refused(exc):
                return Outcome(backend, "unsupported", f"input #{i}: {exc}", error_type=type(exc).__name__,
                               phase="run", seconds=time.perf_counter() - start, reason=INPUT_REASON)
            return Outcome(backend, "error", f"input #{i}: {type(exc).__name__}: {exc}", [i],
                           error_type=type(exc).__name__, phase="run", seconds=time.perf_counter() - start)
        tolerance = ATOL.get(backend, 1e-4) if atol is None else atol
        rtol = SPECIAL_RTOL if special_from is not None and i >= special_from else 0.0
        problem = outputs_match(expected[i], actual, tolerance, rtol) if compare_values else None
        if problem is None and expected_inputs is not None:
            problem = outputs_match(expected_inputs[i], x, tolerance, rtol)
            problem = problem and f"the argument after the call: {problem}"
        if problem:
            failing.append(i)
            first = first or f"input #{i}: {problem}"
    status = "inconsistent" if failing else "ok"
    return Outcome(backend, status, first, failing, phase="run" if failing else "", seconds=time.perf_counter() - start)


#: the refusal bucket of an input the compiled model was not compiled for (``input_refused``)
INPUT_REASON = "an input of a size the model was not compiled for"
#: the host's refusals of an input by its sizes, before it runs anything (``hostgen.manifest``); by
#: name, since a saved host raises its own copies of these classes
_INPUT_REFUSALS = ("InputShapeError", "ShapeGuardError")


def input_refused(exc: Exception) -> bool:
    """Whether ``exc`` is the compiled model refusing an input by its sizes, naming the dim or the
    guard (a model compiled for the example's sizes only, ``SpecialisationWarning``): a refusal of
    that input, not a crash."""
    return isinstance(exc, ValueError) and type(exc).__name__ in _INPUT_REFUSALS


@contextmanager
def loaded_program(program: Program, directory: Path, stem: str | None = None):
    """``(path, model)`` of ``program`` written to ``directory`` and imported; raises
    :class:`Discarded` when it does not import or build; forgets its module on exit."""
    path = write_program(program, directory, stem)
    try:
        module = import_file(path)
    except Exception as exc:  # noqa: BLE001 - a program that does not even import is discarded
        raise Discarded(f"import: {type(exc).__name__}: {exc}") from exc
    try:
        try:
            model = build_model(module, program)
        except Exception as exc:  # noqa: BLE001
            raise Discarded(f"build: {type(exc).__name__}: {exc}") from exc
        yield path, model
    finally:
        forget(module)


def check_program(program: Program, directory: Path, backends: Sequence[str], compile_fn: CompileFn = dycl.compile,
                  n_inputs: int = N_INPUTS, timeout: float | None = None, stem: str | None = None,
                  special: bool = True) -> Checked:
    """Write, import, run and compile ``program`` on ``n_inputs`` random inputs and (if ``special``, and
    the program does not sample) then the special-valued inputs eager runs on; raise :class:`Discarded`
    if it is unusable."""
    with loaded_program(program, directory, stem) as (path, model):
        inputs = make_inputs(program, n_inputs)
        start = time.perf_counter()
        samples = "sampling" in program_features(program)  # its values differ per call: not compared
        if special and not samples:
            inputs += eager_runnable(model, inputs, special_inputs(program))
        after: list[torch.Tensor] = []
        expected, paths = run_eager(copy.deepcopy(model), inputs, after, special_from=n_inputs)
        eager_seconds = time.perf_counter() - start
        outcomes = [check_backend(copy.deepcopy(model), inputs, expected, backend, compile_fn, timeout,
                                  expected_inputs=after, compare_values=not samples, special_from=n_inputs)
                    for backend in backends]
        return Checked(program, path, paths, outcomes, eager_seconds, inputs, n_inputs)
