"""The correctness harness (paper §3.2, Eq. 1).

For inputs x_1..x_N, with V the eager model and C the compiled one:

- final inconsistent rate  η = |{i : post(C(x_i)) != post(V(x_i))}| / N
- max numeric error        δ = log10(max_i ‖C(x_i) − V(x_i)‖∞ + 1e-10)

``post`` is the user-visible result (a label, a token sequence). δ is taken
over the raw outputs; an output of another shape than eager's counts as an
infinite error. The same two numbers are reported for the traced baseline
(``torch.onnx.export`` by tracing, run with ONNX Runtime), together with the
number of distinct eager execution paths the inputs took, the branch coverage
of the compiled program (``dycl.harness.coverage``: per condition how many inputs took
each outcome, measured on the host, not assumed) and latencies with their
spread (``dycl.harness.timing``).
"""

from __future__ import annotations

import io
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from dycl.harness.coverage import HostCoverage, Tally, user_code
from dycl.harness.paths import model_source_files, record_path
from dycl.harness.timing import Timing, interleaved, noise
from dycl.hostgen.names import FORWARD
from dycl.in_process.staleness import WeightGuard
from dycl.progress import Progress
from dycl.rewriter.arguments import positional_arguments

EPSILON = 1e-10


@dataclass(frozen=True)
class Report:
    """What ``check`` measured. Latencies are medians with their interquartile range
    (``dycl.harness.timing``); ``conditions`` has one row per host condition with how many
    inputs took each outcome; ``warnings`` names the one-sided and never-reached ones."""

    n: int
    eta: float
    delta: float
    paths: int
    eager_ms: float
    compiled_ms: float
    traced_eta: float | None
    traced_delta: float | None
    eager_iqr_ms: tuple[float, float] = (math.nan, math.nan)
    compiled_iqr_ms: tuple[float, float] = (math.nan, math.nan)
    compiled_paths: int = 0
    conditions: tuple[dict[str, Any], ...] = ()
    sub_dnns_run: int = 0
    sub_dnns: int = 0
    never_run: tuple[int, ...] = ()
    warnings: tuple[str, ...] = ()
    noise: tuple[str, ...] = ()  # timings that look disturbed (dycl.harness.timing.noise); not coverage warnings

    @property
    def both_outcomes(self) -> int:
        """How many conditions took both outcomes over the inputs."""
        return sum(1 for row in self.conditions if row["true"] and row["false"])

    @property
    def coverage(self) -> str:
        return f"{self.both_outcomes} of {len(self.conditions)}"

    def to_json(self) -> dict[str, Any]:
        def clean(value: Any) -> Any:
            if isinstance(value, float):
                return value if math.isfinite(value) else None
            if isinstance(value, (tuple, list)):
                return [clean(v) for v in value]
            if isinstance(value, dict):
                return {k: clean(v) for k, v in value.items()}
            return value

        return {**{k: clean(v) for k, v in asdict(self).items()}, "both_outcomes": self.both_outcomes,
                "conditions_total": len(self.conditions)}

    def table(self) -> str:
        def fmt(value: float | None) -> str:
            return "—" if value is None else ("inf" if math.isinf(value) else f"{value:.2f}")

        def latency(median: float, iqr: tuple[float, float]) -> str:
            return f"{median:.2f} ms (IQR {iqr[0]:.2f}–{iqr[1]:.2f})"

        lines = [
            f"inputs                      {self.n}",
            f"distinct eager paths        {self.paths}   (compiled: {self.compiled_paths})",
            f"conditions, both outcomes   {self.coverage}",
            f"sub-DNNs run                {self.sub_dnns_run} of {self.sub_dnns}",
            f"inconsistent rate η         {self.eta:.2f}   (traced baseline: {fmt(self.traced_eta)})",
            f"max numeric error δ         {fmt(self.delta)}  (traced baseline: {fmt(self.traced_delta)})",
            f"median latency eager        {latency(self.eager_ms, self.eager_iqr_ms)}",
            f"median latency compiled     {latency(self.compiled_ms, self.compiled_iqr_ms)}  "
            f"({self.eager_ms / self.compiled_ms:.2f}x)",
        ]
        if self.conditions:
            lines += ["", "condition  true  false  where / source"]
            lines += [f"{row['condition']:>9}  {row['true']:>4}  {row['false']:>5}  {row['where'] or '?'}  "
                      f"{row['code'][:70]}" for row in self.conditions]
        lines += [f"warning: {text}" for text in self.warnings]
        lines += [f"warning: timing noise: {text}" for text in self.noise]
        return "\n".join(lines)


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


def path_graph(model: torch.nn.Module, example: tuple, decisions: bool = False) -> bytes:
    """The ONNX model ``torch.onnx.export`` traces on ``example``'s path (``traced_baseline``'s graph);
    ``decisions=True`` adds every tensor value Python read on the way as outputs."""

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
    return buffer.getvalue()


def traced_baseline(model: torch.nn.Module, example: tuple, decisions: bool = False,
                    threads: int | str | None = None) -> Callable[..., Any]:
    """What tracing compilers give: the path of ``example`` exported by
    ``torch.onnx.export`` (tracing) and run with ONNX Runtime.

    The trace keeps only what the outputs need, so the tests of the path's
    branches are dropped; ``decisions=True`` also returns every tensor value
    Python read on the way (the graph then computes what a host must compute to
    choose the path). ``threads``: the session's intra-op threads (None: the pool
    every dycl session gets by default); ``"best"``: whichever of the calling thread
    and that pool runs ``example`` faster, timed in turns (what a benchmark's oracle
    must get: dycl itself runs small graphs on the calling thread)."""
    import onnxruntime as ort

    from dycl.backends.onnxruntime import session_options
    from dycl.backends.thread_choice import pool_threads, time_both

    data = path_graph(model, example, decisions)
    options = session_options()
    if threads == "best":
        arrays = [a.numpy() for a in example if isinstance(a, torch.Tensor)]
        timed = time_both(data, _by_input_names(data, arrays), pool_threads(),
                          runs=BEST_THREADS_RUNS, budget_s=BEST_THREADS_BUDGET_S)
        threads = 1 if timed is None or timed[0] <= timed[1] else pool_threads()
    if threads is not None:
        options.intra_op_num_threads = threads
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]

    def run(*args):
        feeds = {name: a.numpy() for name, a in zip(names, args) if isinstance(a, torch.Tensor)}
        return tuple(torch.from_numpy(o) for o in session.run(None, feeds))

    run.threads = options.intra_op_num_threads
    return run


#: turns of each setting, and the seconds at most, when ``traced_baseline(threads="best")`` times the two
BEST_THREADS_RUNS = 31
BEST_THREADS_BUDGET_S = 1.0


def _by_input_names(data: bytes, arrays: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """``arrays`` (the example's tensors, in order) keyed by the ONNX model's own input names."""
    import onnx

    names = [i.name for i in onnx.load_from_string(data).graph.input]
    return dict(zip(names, arrays))


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
          postprocess: Callable[[Any], Any] | None = None, traced: bool = True, repeat: int = 3,
          progress: bool | None = None) -> Report:
    """Measure ``compiled`` against eager ``model`` on ``inputs`` (each a tensor
    or a tuple of positional arguments): η, δ, paths and branch coverage on one
    pass, then latency by ``dycl.harness.timing.interleaved`` (``repeat`` calls per input;
    ``repeat=0`` skips timing and reports NaN). ``progress``: bars over the inputs on
    stderr (None: when someone is watching, ``dycl.progress``); timings that look
    disturbed are named in ``Report.noise``."""
    _refuse_stale_weights(compiled)
    arguments = [positional_arguments(item) for item in inputs]
    files = model_source_files(model)
    baseline = _traced_or_none(model, arguments[0]) if traced else None
    recorder = _recorder(compiled)
    tally = recorder.tally() if recorder else None
    found = _Agreement(postprocess or default_postprocess)
    bar = Progress("checking eager vs compiled", len(arguments), progress)
    with torch.no_grad():
        for args in arguments:
            bar.step()
            expected, path = record_path(model, *args, files=files)
            found.paths.add(path)
            if recorder is not None:
                actual, trace = recorder.record(compiled, *args)
                tally.add(trace)
            else:
                actual = compiled(*args)
            found.add(expected, actual, baseline(*args) if baseline is not None else None)
    nan = Timing(math.nan, math.nan, math.nan, 0)
    contenders = {"eager": model, "compiled": compiled}
    times = interleaved(contenders, arguments, repeat=repeat, progress=progress) if repeat else {
        "eager": nan, "compiled": nan}
    eager, fast = times["eager"], times["compiled"]
    n = len(arguments)
    return Report(
        n=n, eta=found.inconsistent / n, delta=log_error(found.worst), paths=len(found.paths),
        eager_ms=eager.median_ms, compiled_ms=fast.median_ms,
        traced_eta=found.traced_inconsistent / n if baseline is not None else None,
        traced_delta=log_error(found.traced_worst) if baseline is not None else None,
        eager_iqr_ms=(eager.p25_ms, eager.p75_ms), compiled_iqr_ms=(fast.p25_ms, fast.p75_ms),
        noise=tuple(noise(times)) if repeat else (),
        **(_coverage_fields(tally) if tally else {}),
    )


def _traced_or_none(model: torch.nn.Module, example: tuple) -> Callable[..., Any] | None:
    try:
        return traced_baseline(model, example)
    except Exception as exc:  # noqa: BLE001 - tracing failing is itself a finding
        warnings.warn(f"the traced baseline could not be exported: {exc}", stacklevel=3)
        return None


@dataclass
class _Agreement:
    """Eq. 1's counts over the inputs seen so far, for the compiled model and the traced baseline."""

    post: Callable[[Any], Any]
    paths: set[Any] = field(default_factory=set)
    inconsistent: int = 0
    worst: float = 0.0
    traced_inconsistent: int = 0
    traced_worst: float = 0.0

    def add(self, expected: Any, actual: Any, traced: Sequence[torch.Tensor] | None) -> None:
        """One input: eager's ``expected``, the compiled ``actual``, the baseline's flat outputs (if any)."""
        self.inconsistent += self.post(actual) != self.post(expected)
        self.worst = max(self.worst, max_abs_error(expected, actual))
        if traced is None:
            return
        self.traced_worst = max(self.traced_worst, max_abs_error(expected, traced))
        try:
            traced_result = self.post(_restructure(expected, traced))
        except (StopIteration, RuntimeError, ValueError):
            traced_result = None
        self.traced_inconsistent += traced_result != self.post(expected)


def _coverage_fields(tally: Tally) -> dict[str, Any]:
    """The ``Report`` fields measured on the host (``dycl.harness.coverage``)."""
    return {"compiled_paths": len(tally.paths), "conditions": tuple(tally.conditions()),
            "sub_dnns_run": sum(1 for i in tally.sub_dnns if tally.ran.get(i)), "sub_dnns": len(tally.sub_dnns),
            "never_run": tuple(i for i in tally.sub_dnns if not tally.ran.get(i)),
            "warnings": tuple(tally.warnings())}


def _refuse_stale_weights(compiled: Any) -> None:
    """A ``dycl.CompiledModel``'s weights compared with compile time byte by byte (cost does not matter
    here): ``StaleWeightsError`` for a write the per-call sample misses. Nothing for any other callable."""
    guard = getattr(compiled, "_guard", None)
    if isinstance(guard, WeightGuard):
        guard.check_contents()


def _recorder(compiled: Any) -> HostCoverage | None:
    """A coverage recorder for a ``dycl.CompiledModel``; None for any other callable."""
    host, source = getattr(compiled, "_host", None), getattr(compiled, "host_source", None)
    if host is None or source is None or not hasattr(type(host), FORWARD):
        return None
    return HostCoverage(host, source, user_code(compiled))
