"""The correctness harness (paper §3.2, Eq. 1).

For inputs x_1..x_N, with V the eager model and C the compiled one:

- final inconsistent rate  η = |{i : post(C(x_i)) != post(V(x_i))}| / N
- max numeric error        δ = log10(max_i ‖C(x_i) − V(x_i)‖∞ + 1e-10)

``post`` is the user-visible result (a label, a token sequence). δ is taken
over the raw outputs; an output of another shape than eager's counts as an
infinite error. The same two numbers are reported for the traced baseline
(``torch.onnx.export`` by tracing, run with ONNX Runtime), together with the
number of distinct eager execution paths the inputs took and median latencies.
"""

from __future__ import annotations

import io
import math
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from dycl.paths import model_source_files, record_path

EPSILON = 1e-10


@dataclass(frozen=True)
class Report:
    n: int
    eta: float
    delta: float
    paths: int
    eager_ms: float
    compiled_ms: float
    traced_eta: float | None
    traced_delta: float | None

    def to_json(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()}

    def table(self) -> str:
        def fmt(value: float | None) -> str:
            return "—" if value is None else ("inf" if math.isinf(value) else f"{value:.2f}")

        return "\n".join([
            f"inputs                      {self.n}",
            f"distinct eager paths        {self.paths}",
            f"inconsistent rate η         {self.eta:.2f}   (traced baseline: {fmt(self.traced_eta)})",
            f"max numeric error δ         {fmt(self.delta)}  (traced baseline: {fmt(self.traced_delta)})",
            f"median latency eager        {self.eager_ms:.2f} ms",
            f"median latency compiled     {self.compiled_ms:.2f} ms  ({self.eager_ms / self.compiled_ms:.2f}x)",
        ])


def default_postprocess(output: Any) -> Any:
    """The argmax label of the first tensor output (a classifier's logits)."""
    first = _flat_tensors(output)[0]
    return int(first.reshape(first.shape[0], -1).argmax(-1)[0]) if first.dim() > 1 else int(first.argmax())


def _flat_tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, np.ndarray):
        return [torch.from_numpy(value)]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _flat_tensors(v)]
    if isinstance(value, (int, float, bool)):
        return [torch.tensor(float(value))]
    return []


def max_abs_error(expected: Any, actual: Any) -> float:
    """‖C(x) − V(x)‖∞ over all outputs; inf if their structure or shapes differ."""
    left, right = _flat_tensors(expected), _flat_tensors(actual)
    if len(left) != len(right):
        return math.inf
    worst = 0.0
    for a, b in zip(left, right):
        if a.shape != b.shape:
            return math.inf
        if a.numel():
            worst = max(worst, (a.double() - b.double()).abs().max().item())
    return worst


def log_error(error: float) -> float:
    return math.log10(error + EPSILON) if math.isfinite(error) else math.inf


class _DecisionReads(TorchFunctionMode):
    """Collects the tensors whose value Python reads (``bool``, ``.item()``,
    ``float``, ``int``): what the branches of the traced path decide on."""

    READS = frozenset({"__bool__", "item", "__float__", "__int__", "__index__", "tolist"})

    def __init__(self) -> None:
        super().__init__()
        self.read: list[torch.Tensor] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in self.READS and args and isinstance(args[0], torch.Tensor):
            self.read.append(args[0])
        return func(*args, **(kwargs or {}))


def traced_baseline(model: torch.nn.Module, example: tuple, decisions: bool = False) -> Callable[..., Any]:
    """What tracing compilers give: the path of ``example`` exported by
    ``torch.onnx.export`` (tracing) and run with ONNX Runtime.

    The trace keeps only what the outputs need, so the tests of the path's
    branches are dropped; ``decisions=True`` also returns every tensor value
    Python read on the way (the graph then computes what a host must compute to
    choose the path)."""
    import onnxruntime as ort

    from dycl.backends.onnxruntime import session_options

    class Flat(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *args):
            if not decisions:
                return tuple(_flat_tensors(self.model(*args)))
            with _DecisionReads() as reads:
                outputs = self.model(*args)
            return (*_flat_tensors(outputs), *reads.read)

    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Flat().eval(), example, buffer, dynamo=False, opset_version=17)
    session = ort.InferenceSession(buffer.getvalue(), session_options(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]

    def run(*args):
        feeds = {name: a.numpy() for name, a in zip(names, args) if isinstance(a, torch.Tensor)}
        return tuple(torch.from_numpy(o) for o in session.run(None, feeds))

    return run


def _restructure(template: Any, flat: Sequence[torch.Tensor]) -> Any:
    """Rebuild ``flat`` tensors in the shape of ``template`` (eager's output)."""
    iterator = iter(flat)

    def build(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return next(iterator)
        if isinstance(value, (tuple, list)):
            return type(value)(build(v) for v in value)
        if isinstance(value, (int, float, bool)):
            item = next(iterator)
            return type(value)(item.item())
        return value

    return build(template)


def check(model: torch.nn.Module, compiled: Callable[..., Any], inputs: Sequence[Any],
          postprocess: Callable[[Any], Any] | None = None, traced: bool = True) -> Report:
    """Measure ``compiled`` against eager ``model`` on ``inputs`` (each a tensor
    or a tuple of positional arguments)."""
    post = postprocess or default_postprocess
    arguments = [item if isinstance(item, tuple) else (item,) for item in inputs]
    files = model_source_files(model)
    baseline = None
    if traced:
        try:
            baseline = traced_baseline(model, arguments[0])
        except Exception as exc:  # noqa: BLE001 - tracing failing is itself a finding
            warnings.warn(f"the traced baseline could not be exported: {exc}", stacklevel=2)
    paths = set()
    inconsistent = traced_inconsistent = 0
    worst = traced_worst = 0.0
    eager_times, compiled_times = [], []
    with torch.no_grad():
        for args in arguments:
            _, path = record_path(model, *args, files=files)
            paths.add(path)
            start = time.perf_counter()
            expected = model(*args)
            eager_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            actual = compiled(*args)
            compiled_times.append(time.perf_counter() - start)
            inconsistent += post(actual) != post(expected)
            worst = max(worst, max_abs_error(expected, actual))
            if baseline is not None:
                flat = baseline(*args)
                traced_error = max_abs_error(expected, flat)
                traced_worst = max(traced_worst, traced_error)
                try:
                    traced_result = post(_restructure(expected, flat))
                except (StopIteration, RuntimeError, ValueError):
                    traced_result = None
                traced_inconsistent += traced_result != post(expected)
    n = len(arguments)
    return Report(
        n=n,
        eta=inconsistent / n,
        delta=log_error(worst),
        paths=len(paths),
        eager_ms=statistics.median(eager_times) * 1000,
        compiled_ms=statistics.median(compiled_times) * 1000,
        traced_eta=traced_inconsistent / n if baseline is not None else None,
        traced_delta=log_error(traced_worst) if baseline is not None else None,
    )
