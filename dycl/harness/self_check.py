"""The check every ``dycl.compile`` ends with: the compiled model against eager, on the
example and on inputs derived from it, whatever the model's patterns.

Assumes: the model is in eval semantics while ``run`` runs (``dycl.api.compile`` calls it
inside ``model_state.preserved``), and calling the compiled model is side-effect free
apart from the input write-back it promises (``dycl.in_process.written_inputs``).

Guarantees: ``run`` raises ``SelfCheckError`` naming the first difference (which input,
which output or input leaf, expected against got) when, on the example, on a derived
input or on an input found to reach a branch they did not (``dycl.harness.self_check_search``)
that eager accepts, the compiled model returns another structure, type, dtype, shape or
value than eager (values within ``tolerance``), or leaves the arguments in another state
than eager leaves them (a mutated input). Eager and the compiled model each run on their
own copy of every input, so the caller's example is never touched. A derived input on
which eager raises is skipped, and so is one of another size that the compiled model
refuses with a ``ValueError`` (a documented refusal: a specialised dim, a shape guard).
A model whose eager outputs differ between two runs on the same input (it samples) is
compared on structure, dtypes and shapes only. A derived input on which eager's float32
outputs differ from its own float64 outputs (a tie that rounding breaks, note in
``dycl.harness.conditioning``) is skipped where the compiled model differs.

``DYCL_SELF_CHECK=0`` in the environment, or ``dycl.compile(..., check=False)``, turns
the check off.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from dycl.harness.conditioning import decided_by_rounding
from dycl.harness.self_check_inputs import Derived, derived_inputs
from dycl.harness.self_check_search import BranchSearch, branch_search
from dycl.model.example_copy import copy_tensors
from dycl.model.model_state import ModelSnapshot
from dycl.model.records import fields_of, is_record
from dycl.model.signature import bind_example, example_arguments

#: absolute tolerance, relative to the largest magnitude of the expected value (ONNX Runtime and TVM fuse and
#: reorder float arithmetic); the same order as the tests' ``atol=1e-4`` on unit-scale outputs
ATOL, RTOL = 1e-4, 1e-3


class SelfCheckError(RuntimeError):
    """dycl compiled a model that is already wrong on the example or on an input derived
    from it: a dycl bug. The message names the input and the first difference."""


class OtherSizeError(SelfCheckError):
    """The compiled model is right at the example's sizes and wrong (or fails) at another
    size its symbolic dims accept: ``dycl.compile`` then compiles the example's shapes."""


def enabled(requested: bool | None) -> bool:
    """Whether to run the check: ``requested`` when given, else unless ``DYCL_SELF_CHECK=0``."""
    if requested is not None:
        return requested
    return os.environ.get("DYCL_SELF_CHECK", "1") not in ("0", "")


@dataclass(frozen=True)
class Subject:
    """What the check compares: ``eager`` and ``compiled`` are called as ``f(*args, **kwargs)``;
    ``symbolic`` maps the id of each example tensor to the axes the compiled model takes at
    any size (``dycl.harness.self_check_inputs``)."""

    eager: Callable[..., Any]
    compiled: Callable[..., Any]
    args: tuple
    kwargs: dict[str, Any]
    symbolic: dict[int, tuple[int, ...]]
    #: a model whose forward writes module state (``rewriter.state_threading``): each run starts
    #: from the same state, put back before the compiled run and before a second eager run
    stateful: torch.nn.Module | None = None
    #: more inputs, for the branches the derived ones leave unreached (``dycl.harness.self_check_search``)
    search: BranchSearch | None = None


def subject(model: torch.nn.Module, compiled: Callable[..., Any], result: Any, example_input: Any,
            kwargs: dict[str, Any] | None) -> Subject:
    """The check of ``compiled``, compiled by ``result`` (``dycl.compiler.CompileResult``) from
    ``model`` and the example call ``model(*example_input, **kwargs)``. A per-sample model
    is checked at the example's size against eager on each sample alone, its outputs joined
    (``dycl.per_sample.testing.PerSampleEager``)."""
    args, kwargs = example_arguments(example_input), dict(kwargs or {})
    if result.manifest.per_sample:  # eager's reference: each sample alone, the outputs joined
        from dycl.per_sample.testing import PerSampleEager

        return Subject(PerSampleEager(model), compiled, args, kwargs, {}, search=branch_search(compiled, None))
    try:
        passed = bind_example(model, args, kwargs)
    except TypeError:
        passed = {}
    symbolic = symbolic_axes(passed, result.rewritten.inputs, result.manifest.inputs)
    stateful = model if result.rewritten.state else None
    return Subject(model, compiled, args, kwargs, symbolic, stateful, branch_search(compiled, stateful))


def run(subject: Subject) -> int:
    """Compare on the example and its derived inputs, then on inputs that reach the host
    conditions' outcomes none of them reached (``subject.search``); return how many were compared."""
    compared, example = 0, None
    for derived in derived_inputs(subject.args, subject.kwargs, subject.symbolic):
        example = example or derived
        if _compare(subject, derived):
            compared += 1
            if subject.search is not None and not derived.resized:
                subject.search.note(derived)
    if subject.search is not None and example is not None:
        for derived in subject.search.candidates(example):
            compared += _compare(subject, derived)
    return compared


def symbolic_axes(passed: dict[str, Any], flat_inputs: tuple[Any, ...], ports: tuple[Any, ...]
                  ) -> dict[int, tuple[int, ...]]:
    """The id of each example tensor -> its axes the compiled model takes at any size (a
    manifest dim that is a plain name), from ``passed`` (``dycl.model.signature.bind_example``),
    the rewritten function's ``FlatInput`` s and the manifest's input ports. Inputs that do
    not line up (a library model's wrapper) are left out."""
    by_name = {flat.name: flat for flat in flat_inputs}
    axes: dict[int, tuple[int, ...]] = {}
    for port in ports:
        flat = by_name.get(port.name)
        if flat is None or flat.parameter not in passed:
            continue
        value = passed[flat.parameter]
        try:
            value = value if flat.key is None else value[flat.key]
        except (KeyError, IndexError, TypeError):
            continue
        named = tuple(axis for axis, dim in enumerate(port.shape) if isinstance(dim, str) and dim.isidentifier())
        if isinstance(value, torch.Tensor) and named and value.dim() == len(port.shape):
            axes[id(value)] = named
    return axes


def timed_run(subject: Subject) -> dict[str, float]:
    """``run``, with what it cost: ``{"inputs": compared, "seconds": wall-clock, "cpu_seconds": process}``
    (``compiled.stats["self_check"]``)."""
    wall, cpu = time.perf_counter(), time.process_time()
    compared = run(subject)
    return {"inputs": compared, "seconds": round(time.perf_counter() - wall, 4),
            "cpu_seconds": round(time.process_time() - cpu, 4)}


def _compare(subject: Subject, derived: Derived) -> bool:
    """Compare one input; False if it was skipped (eager raised; a refused size)."""
    before = ModelSnapshot.take(subject.stateful) if subject.stateful is not None else None
    try:
        expected, eager_after = _eager(subject.eager, derived)
    except Exception:  # noqa: BLE001 - an input eager refuses tells nothing about the compiled model
        if derived.is_example:
            raise
        return False
    finally:
        if before is not None:
            before.restore()
    arguments = copy_tensors((derived.args, derived.kwargs))
    try:
        with torch.no_grad():
            actual = subject.compiled(*arguments[0], **arguments[1])
    except Exception as error:
        if derived.resized and isinstance(error, ValueError):  # a size refused by name (specialised dim, guard)
            return False
        raise _error(derived)(f"the compiled model raises on the {derived.description}, which eager takes "
                             f"({type(error).__name__}: {str(error)[:200]}){_hint(False, derived)}") from error
    problems = difference(expected, actual), difference(eager_after, arguments)
    if before is not None and problems != (None, None):
        before.restore()  # the second eager run starts from the state the first did
    sampled = problems != (None, None) and _samples(subject.eager, derived, expected)
    if sampled:  # eager itself answers otherwise on a second run: compare what does not depend on the draw
        problems = _structure_problems(subject, derived, expected, eager_after, actual, arguments)
    elif problems[0] is not None and not derived.is_example and decided_by_rounding(  # the state restored above
            subject.eager, derived.args, derived.kwargs, expected, difference):
        return False  # a tie that float32 rounding breaks: no evidence either way (dycl.harness.conditioning)
    if problems[0] is not None:
        raise _error(derived)(f"the compiled model differs from eager on the {derived.description}: "
                             f"output{problems[0]}{_hint(sampled, derived)}")
    if problems[1] is not None:
        raise _error(derived)(f"the compiled model leaves the arguments of the call in another state than eager on "
                             f"the {derived.description}: argument{_argument_name(problems[1])}"
                             f"{_hint(sampled, derived)}")
    return True


#: eager draws a sampling model's structure is compared with: a draw may also decide a branch
SAMPLED_DRAWS = 8


def _structure_problems(subject: Subject, derived: Derived, expected: Any, eager_after: Any, actual: Any,
                        arguments: Any) -> tuple[Any, Any]:
    """A sampling model's differences in structure, dtypes and shapes: none where the compiled
    output's are those of one of ``SAMPLED_DRAWS`` eager runs (a drawn value may take a branch
    that changes a shape: ``if dropout(x).mean() < t``, so one eager draw is not the only answer)."""
    problems = difference(expected, actual, False), difference(eager_after, arguments, False)
    for _ in range(SAMPLED_DRAWS if problems != (None, None) else 0):
        before = ModelSnapshot.take(subject.stateful) if subject.stateful is not None else None
        try:
            expected, eager_after = _eager(subject.eager, derived)
        finally:
            if before is not None:
                before.restore()
        if (difference(expected, actual, False), difference(eager_after, arguments, False)) == (None, None):
            return None, None
    return problems


def _error(derived: Derived) -> type[SelfCheckError]:
    return OtherSizeError if derived.resized else SelfCheckError


def _eager(model: Callable[..., Any], derived: Derived) -> tuple[Any, Any]:
    """``(outputs, arguments after the call)`` of eager on copies of the input."""
    arguments = copy_tensors((derived.args, derived.kwargs))
    with torch.no_grad():
        return model(*arguments[0], **arguments[1]), arguments


def _samples(model: Callable[..., Any], derived: Derived, expected: Any) -> bool:
    """Whether the model draws random numbers on this input: a sampling op runs in eager (a
    random branch may give the same values twice, so a second run alone cannot tell), or a
    second eager run returns other values; run only where the compiled model differs."""
    with _SamplingWatch() as watch:
        again, _ = _eager(model, derived)
    return watch.sampled or difference(expected, again, compare_values=True, atol=0.0, rtol=0.0) is not None


#: torch functions and tensor methods that draw from the random number generator
_SAMPLERS = frozenset({"rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like",
                       "bernoulli", "bernoulli_", "multinomial", "normal", "normal_", "uniform_", "exponential_",
                       "geometric_", "cauchy_", "log_normal_", "random_", "poisson"})
_DROPOUTS = frozenset({"dropout", "dropout_", "alpha_dropout", "feature_alpha_dropout", "feature_dropout",
                       "dropout1d", "dropout2d", "dropout3d"})


class _SamplingWatch(TorchFunctionMode):
    """Notes whether a sampling op runs (dropout only where it is in training mode)."""

    def __init__(self) -> None:
        super().__init__()
        self.sampled = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in _SAMPLERS:
            self.sampled = True
        elif name in _DROPOUTS:
            training = kwargs.get("training", kwargs.get("train", args[2] if len(args) > 2 else True))
            self.sampled = self.sampled or bool(training)
        return func(*args, **kwargs)


def _hint(sampled: bool, derived: Derived) -> str:
    if sampled:
        return " (the model samples: only structure, dtypes and shapes were compared)"
    other_size = (" dycl.compile(..., dynamic=False) compiles the example's shapes only, which the check found "
                  "right;" if derived.resized else "")
    return (f". This is a dycl bug: please report it with the model;{other_size} dycl.compile(..., check=False) "
            f"returns the model regardless")


def _argument_name(problem: str) -> str:
    """``[0][1]...`` of the (args, kwargs) pair as ``[1]`` (positional) or ``['name']``."""
    return problem[3:] if problem.startswith(("[0]", "[1]")) else problem


def difference(expected: Any, actual: Any, compare_values: bool = True, atol: float = ATOL,
               rtol: float = RTOL) -> str | None:
    """None if ``actual`` matches ``expected``, else ``"[path]: expected ..., got ..."``
    for the first leaf (or container) that differs."""
    for path, want, got in _pairs(expected, actual, ""):
        problem = _leaf_difference(want, got, compare_values, atol, rtol)
        if problem is not None:
            return f"{path}: {problem}"
    return None


def _pairs(expected: Any, actual: Any, path: str) -> Iterator[tuple[str, Any, Any]]:
    """``(path, expected leaf, actual leaf)``; a container that differs in form is one pair."""
    if isinstance(expected, (tuple, list)) and not isinstance(expected, torch.Size):
        if type(expected) is not type(actual) or len(expected) != len(actual):
            yield path, expected, actual
            return
        for index, (want, got) in enumerate(zip(expected, actual)):
            yield from _pairs(want, got, f"{path}[{index}]")
    elif isinstance(expected, dict):
        if not isinstance(actual, dict) or list(expected) != list(actual):
            yield path, expected, actual
            return
        for key in expected:
            yield from _pairs(expected[key], actual[key], f"{path}[{key!r}]")
    elif is_record(expected) and type(actual) is type(expected):  # a KV cache: by its fields (dycl.model.records)
        for name in fields_of(expected):
            yield from _pairs(getattr(expected, name), getattr(actual, name, None), f"{path}.{name}")
    else:
        yield path, expected, actual


def _leaf_difference(want: Any, got: Any, compare_values: bool, atol: float, rtol: float) -> str | None:
    if isinstance(want, (tuple, list, dict)) and not isinstance(want, torch.Size):
        return f"expected {_form(want)}, got {_form(got)}"
    if isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"expected a tensor, got {_form(got)}"
        if want.shape != got.shape or want.dtype != got.dtype:
            return f"expected {tuple(want.shape)} {want.dtype}, got {tuple(got.shape)} {got.dtype}"
        return _tensor_difference(want, got, atol, rtol) if compare_values else None
    if type(want) is not type(got):
        return f"expected {type(want).__name__} {want!r:.60}, got {type(got).__name__} {got!r:.60}"
    if not compare_values:
        return None
    if isinstance(want, float):
        close = want == got or abs(want - got) <= atol + rtol * abs(want) or (want != want and got != got)
        return None if close else f"expected {want!r}, got {got!r}"
    return None if _equal(want, got) else f"expected {want!r:.60}, got {got!r:.60}"


def _tensor_difference(want: torch.Tensor, got: torch.Tensor, atol: float, rtol: float) -> str | None:
    if not (want.is_floating_point() or want.is_complex()):
        if torch.equal(want, got):
            return None
        return f"values differ at {int((want != got).sum())} of {want.numel()} elements"
    scale = float(want.abs().nan_to_num(0.0, 0.0, 0.0).max()) if want.numel() else 0.0
    if torch.allclose(got, want, rtol=rtol, atol=atol * max(1.0, scale), equal_nan=True):
        return None
    gap = (want.double() - got.double()).abs().nan_to_num(float("inf"))
    return f"values differ (max abs diff {float(gap.max()):.3g}, expected magnitude up to {scale:.3g})"


def _equal(want: Any, got: Any) -> bool:
    try:
        return bool(want == got)
    except Exception:  # noqa: BLE001 - an object without a usable ==: its type matched, nothing more to compare
        return True


def _form(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__} of {len(value)}"
    if isinstance(value, dict):
        return f"{type(value).__name__} with keys {list(value)}"
    return type(value).__name__


__all__ = ["OtherSizeError", "SelfCheckError", "Subject", "difference", "enabled", "run", "subject", "symbolic_axes",
           "timed_run"]
