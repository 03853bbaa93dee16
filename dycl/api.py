"""The public API: ``dycl.compile``, ``CompiledModel``, ``dycl.load``."""

from __future__ import annotations

import copy
import datetime
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils import _pytree as pytree

from dycl.artifact import host_model, load_host, write_artifact
from dycl.artifact.readme import readme, requirements_txt
from dycl.compiler import CompileResult, compile_from, compile_front
from dycl.harness import self_check
from dycl.hcfg.draw import layout_json, to_dot
from dycl.hcfg.levers import Levers
from dycl.hostgen.manifest import HOST_FILE, MANIFEST_FILE, Manifest
from dycl.in_process.array_guard import ArrayGuard
from dycl.in_process.call_guard import CallGuard
from dycl.in_process.config_guard import ConfigGuard
from dycl.in_process.dtype_guard import DefaultDtypeGuard
from dycl.in_process.globals_guard import GlobalsGuard
from dycl.in_process.record_inputs import RecordUpdates
from dycl.in_process.staleness import WeightGuard
from dycl.in_process.state_sync import ModuleState
from dycl.in_process.structure_guard import StructureGuard
from dycl.model.batch_check import static_batch_needed
from dycl.model.dynamic import DynamicSpec
from dycl.model.example_copy import copy_tensors
from dycl.model.model_state import TrainingModeError, eval_mode, preserved, training_modules
from dycl.model.outputs import rebuild
from dycl.model.quiet import muted
from dycl.model.records import host_form, is_record
from dycl.model.validate import validate
from dycl.rewriter.arguments import positional_arguments
from dycl.rewriter.errors import SpecialisationWarning


def _to_numpy(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return host_form(value) if is_record(value) else value  # a KV cache passed back (dycl.model.records)


def _host_arguments(args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """The host's numpy arguments. The usual call (CPU tensors that need no grad, positional)
    skips the pytree walk and ``detach().cpu()``: together 20-30 µs of a 0.3 ms call."""
    if not kwargs and all(type(a) is torch.Tensor for a in args):
        try:  # Tensor.numpy refuses what needs detach().cpu() (grad, another device) or what numpy cannot hold
            return tuple(map(torch.Tensor.numpy, args)), kwargs
        except (RuntimeError, TypeError):
            pass
    return pytree.tree_map(_to_numpy, (args, kwargs))


#: the type of the object that owns an ONNX Runtime output's memory (an array's ``base``)
_CAPSULE = type(datetime.datetime_CAPI)


def _runtime_buffer(array: np.ndarray) -> bool:
    """Whether ``array`` is (a view of) an array ONNX Runtime returned: its memory belongs to a
    capsule holding that run's output, fresh for each run and held by nothing else (the runtime
    copies a graph output that is a graph input), so it needs no copy before it is handed over."""
    base = array.base
    while isinstance(base, np.ndarray):
        base = base.base
    return type(base) is _CAPSULE


def _to_torch(value: Any, per_sample: bool = False) -> Any:
    """``value`` with its arrays as tensors; ``per_sample`` (the per-sample host's outputs): numpy
    scalars too (it gives a sample's 0-d tensor as one), and every array copied but those it owns
    (it may hand one runtime row to several samples: a sub-DNN without inputs)."""
    if isinstance(value, np.ndarray):
        # a fresh runtime output is handed over as is; a view of a stored constant or of
        # an input (returned unchanged) is copied, so that the caller cannot alter them
        flags = value.flags
        owned = flags.writeable and (flags.owndata or (not per_sample and _runtime_buffer(value)))
        return torch.from_numpy(value if owned else np.array(value, copy=True))
    if isinstance(value, np.generic) and per_sample:
        return torch.from_numpy(np.asarray(value).copy())
    # otherwise a numpy scalar (np.int64 from ``np.argmax(confidences)`` in forward) is what eager returns
    # too: every tensor reaches the host as an array (sub-DNN outputs, constants), never as a numpy scalar
    if isinstance(value, tuple):
        return tuple(_to_torch(v, per_sample) for v in value)
    if isinstance(value, list):
        return [_to_torch(v, per_sample) for v in value]
    if isinstance(value, dict):
        return {k: _to_torch(v, per_sample) for k, v in value.items()}
    return value


class CompiledModel:
    """A compiled model: call it like the original (torch tensors in, torch out).

    ``host_source`` is the generated host program, ``stats`` the sub-DNN and
    condition counts and the seconds spent per phase; ``save(dir)`` writes the
    standalone artifact.
    """

    def __init__(self, host_model: Any, host_source: str, result: CompileResult | None = None) -> None:
        self._host = host_model
        self.host_source = host_source
        self._result = result
        self._guard: WeightGuard | None = None  # set by compile(): detects weights changed since
        self._globals_guard: GlobalsGuard | None = None  # set by compile(): detects globals rebound since
        self._config_guard: ConfigGuard | None = None  # set by compile(): detects folded attributes changed since
        self._call_guard: CallGuard | None = None  # set by compile(): the three above as one check per call
        self._eval_model: torch.nn.Module | None = None  # live modules the backend runs, put in eval per call
        self._state: ModuleState | None = None  # set by compile() for a forward that writes module state
        self._record_updates: RecordUpdates | None = None  # set by compile(): records passed in, updated, returned
        self._model: torch.nn.Module | None = None  # set by compile(): the model the guards watch

    def __deepcopy__(self, memo: dict[int, Any]) -> CompiledModel:
        """A compiled model of a deep copy of the model (the same copy where the model is copied in
        the same ``deepcopy``), sharing the compiled code, with guards of its own on the copy's
        weights and attributes (``_guarded``). ``TypeError`` where the compiled code itself reads the
        model: a forward that writes module state, or the in-process ``torch`` backend."""
        if self._model is None:  # loaded from an artifact: nothing of the caller's to watch
            copied = CompiledModel(self._host, self.host_source, None)
        elif self._state is not None or self._eval_model is not None:
            raise TypeError("this compiled model reads and writes its model's modules on every call (module "
                            "state or backend='torch'), so a copy cannot run on the copied model: compile "
                            "copy.deepcopy(model) instead")
        else:  # the copy's guards start from the copied model as it is: first, that it is still the compiled one
            self._call_guard.check()
            copied = _guarded(CompiledModel(self._host, self.host_source, self._result),
                              copy.deepcopy(self._model, memo), memo)
        copied._record_updates = self._record_updates
        memo[id(self)] = copied
        return copied

    def __copy__(self) -> CompiledModel:
        """The same compiled model (same code, guards and model)."""
        copied = object.__new__(CompiledModel)
        copied.__dict__.update(self.__dict__)
        return copied

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("a CompiledModel holds runtime sessions and cannot be pickled: save() it and "
                        "dycl.load() the directory, or pickle the model and compile it again")

    @property
    def stats(self) -> dict[str, Any]:
        return dict(self._result.stats) if self._result else {}

    @property
    def graph(self):
        """The HCFG (``graph.to_dot()`` draws it)."""
        return self._result.graph if self._result else None

    @property
    def manifest(self) -> Manifest:
        """What ``save`` writes as ``manifest.json`` (``manifest["inputs"]`` reads a field as JSON)."""
        return self._host.manifest

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        given = (args, kwargs)
        args, kwargs = _host_arguments(args, kwargs)
        try:
            raw = self.run_numpy(*args, **kwargs)
        except ValueError as error:
            if type(error).__name__ != "InputTypeError":  # the host's own copy of hostgen.manifest's class
                raise
            raise TypeError(f"expected a torch.Tensor for {error.name}, got {error.got}") from None
        outputs = _to_torch(raw, self._host.manifest.per_sample)
        spec = self._result.output_spec if self._result is not None else None
        result = rebuild(outputs, spec) if spec is not None else outputs
        return result if self._record_updates is None else self._record_updates.apply(*given, result)

    def run_numpy(self, *args: Any, **kwargs: Any) -> Any:
        """Call the host directly with numpy arrays (what ``host.py`` does). Arrays that
        are stored constants come back read-only."""
        if self._call_guard is not None:
            self._call_guard.check()
        if self._state is not None:
            return self._with_module_state(args, kwargs)
        return self._run_host(self._host, *args, **kwargs)

    def _run_host(self, call: Any, *args: Any, **kwargs: Any) -> Any:
        if self._eval_model is None:
            return call(*args, **kwargs)
        with eval_mode(self._eval_model):  # the torch backend runs the live modules
            return call(*args, **kwargs)

    def _with_module_state(self, args: tuple, kwargs: dict[str, Any]) -> Any:
        """One call that starts from the user's module state and writes the final state back to it."""
        with self._state.lock:
            outputs, final = self._run_host(self._host.call_with_state, self._state.read(), *args, **kwargs)
            self._state.write(final)
        return outputs

    def save(self, directory: str | Path) -> Path:
        if self._result is None:
            raise ValueError("this model was loaded from an artifact; copy its directory instead")
        if not self._result.backend.standalone:
            raise ValueError(f"backend {self._result.backend.name!r} runs only in-process and cannot be saved; "
                             "compile with backend='onnxruntime'")
        manifest = self._result.manifest
        files = dict(self._result.files)
        picture = layout_json(self._result.graph)
        files[HOST_FILE] = self.host_source.encode()
        files["hcfg.dot"] = to_dot(picture).encode()
        files["hcfg.json"] = (json.dumps(picture, indent=1) + "\n").encode()
        files["README.md"] = readme(manifest).encode()
        files["requirements.txt"] = requirements_txt(manifest).encode()
        files[MANIFEST_FILE] = manifest.to_bytes()
        return write_artifact(directory, files)

    def __repr__(self) -> str:
        """Model, backend, sub-DNN and condition counts, inputs and outputs (``dycl.summary``)."""
        from dycl.summary import text

        return text(self.manifest, self.stats)

    def _repr_html_(self) -> str:
        from dycl.summary import html_table

        return html_table(self.manifest, self.stats)

    def draw(self, path: str | Path, engine: str | None = None) -> str:
        """Draw the HCFG to ``path`` (.svg or .png, ``dycl.hcfg.draw``); returns the path. Only
        for a model compiled in this process (a saved artifact: ``python -m dycl show DIR --picture``)."""
        if self._result is None:
            raise ValueError("this model was loaded from an artifact: draw it with "
                             "`python -m dycl show DIR --picture FILE.svg`")
        from dycl.hcfg.draw import draw

        return draw(self._result.graph, path, engine)


def compile(model: torch.nn.Module, example_input: Any = None, backend: str = "onnxruntime",
            optimize: bool | Levers = True, progress: bool | None = None, dynamic: DynamicSpec = True,
            kwargs: dict[str, Any] | None = None, mode: str | None = None, threads: int | None = None,
            per_sample: bool = False, check: bool | None = None,
            **backend_options: Any) -> CompiledModel:  # noqa: A001 - the design's name
    """Compile ``model`` (whose ``forward`` may branch on data) for ``example_input``
    (a tensor or a tuple of positional arguments) and ``kwargs`` (keyword arguments,
    as ``torch.export`` takes them). Every branch is compiled now; nothing is
    compiled when the model is called. The compiled model accepts calls of the
    example's form (``dycl.model.signature``).

    ``dynamic`` says which input dims may differ from the example's at call time
    (``dycl.model.dynamic``): by default the batch dim; ``{"x": {2: "h", 3: "w"}}`` adds
    named dims, ``"all"`` makes every dim symbolic, ``False`` compiles the
    example's exact shapes. One artifact serves every size.

    ``optimize``: the compile-time optimisations, all on (True), the graph's off
    (False: the ablation of paper §5.4), or each one as a ``Levers``
    (``dycl.hcfg.levers``).

    ``backend_options`` go to the backend: ``backend="tvm"`` takes ``tune_trials``
    (MetaSchedule trials per distinct kernel; records cached), ``target``,
    ``schedule``, ``jobs`` and ``specialize`` (see ``dycl.backends.tvm``);
    ``backend="onnxruntime"`` takes ``cache_dir`` (or ``DYCL_CACHE_DIR``): a
    content-addressed cache of its exports (``dycl.backends.ort_cache``).

    Where the batch is symbolic by default but eager PyTorch fails at twice the
    example's batch (a model written for one sample), the batch is compiled static
    with a ``SpecialisationWarning`` (``dycl.model.batch_check``). The model's own prints
    are silent while it compiles (``dycl.model.quiet``).

    dycl compiles inference: a model (or submodule) in training mode is refused
    with ``TrainingModeError`` unless ``mode="eval"`` asks for eval semantics.
    Compiling never changes ``model`` (its state is restored after tracing). Module
    state a ``forward`` writes (tensors, bools, ints and floats on modules) is an input
    and an output of the compiled model: it is read from ``model`` before each call and
    written back after (``dycl.in_process.state_sync``); other state writes are refused. The
    weights are compiled as they are now: calling the result after changing them
    raises ``dycl.in_process.staleness.StaleWeightsError``; the module globals its code read,
    likewise (``dycl.in_process.globals_guard.StaleGlobalsError``; the saved artifact cannot see them).

    ``per_sample=True`` compiles a model written for one sample (the example has a
    batch dim of 1) to take a batch and return, per sample, what eager returns for it
    alone: each sub-DNN runs once per group of samples that take its branch
    (``dycl.per_sample``, which also says how the outputs are joined).

    Compiling runs ``forward`` on copies of the example only. It ends by comparing the
    compiled model with eager on the example and on inputs derived from it
    (``dycl.harness.self_check``), raising ``dycl.SelfCheckError`` at the first difference;
    ``check=False`` (or ``DYCL_SELF_CHECK=0``) skips that. A model right at the example's
    sizes and wrong at another size its symbolic dims accept is compiled again for the
    example's shapes (``dynamic=False``), with a ``dycl.SpecialisationWarning`` naming the
    difference."""
    validate(model, example_input, kwargs)
    if mode not in (None, "eval"):
        raise ValueError(f"mode must be None or 'eval', not {mode!r}: dycl compiles inference only")
    training = training_modules(model)
    if training and mode is None:
        raise TrainingModeError(model, training)
    pristine = copy_tensors((example_input, kwargs))  # compiling runs forward on copies (dycl.model.example_copy)
    example_input, kwargs = copy_tensors(pristine)
    levers = Levers.of(optimize)
    options = dict(backend=backend, progress=progress, backend_options=backend_options, kwargs=kwargs,
                   levers=levers, per_sample=per_sample)
    with preserved(model), muted():  # eval mode, restored after; the model's prints silent (dycl.model.quiet)
        front_end = compile_front(model, example_input, dynamic=dynamic, **options)  # rewrite, build, optimize
    # the batch is decided before the stages that read it: a one-sample model compiles once, static
    with preserved(model, refuse_writes=False), muted():  # eager forward may write the state it threads
        batch_1 = static_batch_needed(model, example_input, kwargs, dynamic, per_sample)  # dycl.model.batch_check
    with preserved(model), muted():
        result = compile_from(front_end, dynamic=False if batch_1 else dynamic)
    front_end = _front_end(result)  # compiling again for a static batch starts after the build walk
    with preserved(model, refuse_writes=False), muted():  # a cache passed in, returned: dycl.in_process.record_inputs
        updates = RecordUpdates.find(model, positional_arguments(pristine[0]), pristine[1] or {})
    compiled = _compiled_model(model, result, threads)
    compiled._record_updates = updates
    if not self_check.enabled(check):
        return compiled
    try:
        _self_check(model, compiled, result, pristine)
    except self_check.OtherSizeError as failure:
        if dynamic is False or per_sample:
            raise
        warnings.warn(SpecialisationWarning(
            f"{type(model).__name__}: dycl compiled the example's shapes only (dynamic=False): "
            f"{str(failure).split('. This is a dycl bug')[0]}; dycl could not keep the symbolic dims symbolic "
            "in every compiled part, and the compiled model refuses other sizes by name"), stacklevel=2)
        result, front_end = _compiled_static(model, front_end)
        compiled = _compiled_model(model, result, threads)
        compiled._record_updates = updates
        _self_check(model, compiled, result, pristine)
    return compiled


def _compiled_static(model: torch.nn.Module, front_end: Any) -> tuple[CompileResult, Any]:
    """The compile of ``front_end`` again for the example's shapes (``dynamic=False``), and its front end."""
    with preserved(model), muted():
        result = compile_from(front_end, dynamic=False)
    return result, _front_end(result)


def _front_end(result: CompileResult) -> Any:
    """``result.front_end``, dropped from ``result`` (it holds the build walk's values)."""
    front_end, result.front_end = result.front_end, None
    return front_end


def _compiled_model(model: torch.nn.Module, result: CompileResult, threads: int | None) -> CompiledModel:
    """The in-process model of ``result`` with its guards: weights, globals, folded config and module state."""
    compiled = from_result(result, **({} if threads is None else {"threads": threads}))
    if result.rewritten.state:  # read from the model before each call, written back after (dycl.in_process.state_sync)
        compiled._state = ModuleState(result.rewritten.state)
    if not result.backend.standalone:  # it runs the live modules: in eval mode, whatever the model's flags
        compiled._eval_model = model
    return _guarded(compiled, model)


def _guarded(compiled: CompiledModel, model: torch.nn.Module, memo: dict[int, Any] | None = None) -> CompiledModel:
    """``compiled`` watching ``model``: its weights, the globals and the folded attributes. ``memo``: a
    ``deepcopy`` of the compiled model is under way, ``model`` is the copy (the folded reads' modules
    are taken through it)."""
    result = compiled._result
    state = compiled._state.keys if compiled._state is not None else frozenset()
    # a backend running the live modules reads their weights' contents as eager does: no content guard
    compiled._guard = WeightGuard(model, state, contents=result.backend.standalone)
    compiled._globals_guard = GlobalsGuard(result.rewritten.functions, {type(m) for m in model.modules()})
    reads = result.rewritten.config_reads
    if reads:  # thresholds and other Python values folded into the code
        compiled._config_guard = ConfigGuard(model, reads if memo is None else copy.deepcopy(reads, memo))
    compiled._call_guard = CallGuard(compiled._guard, compiled._globals_guard, compiled._config_guard,
                                     StructureGuard(model, state), DefaultDtypeGuard(),
                                     ArrayGuard(model, compiled._globals_guard.array_reads))
    compiled._model = model
    return compiled


def _self_check(model: torch.nn.Module, compiled: CompiledModel, result: CompileResult, pristine: Any) -> None:
    """``dycl.harness.self_check`` on the pristine example, its cost in ``stats["self_check"]``."""
    with preserved(model, refuse_writes=False), muted():  # eager and compiled write the state they thread
        result.stats["self_check"] = self_check.timed_run(self_check.subject(model, compiled, result, *pristine))


def from_result(result: CompileResult, **options: Any) -> CompiledModel:
    """The in-process model of a compile result, built by the host's own loader
    (``from_verified``, as ``dycl.load`` and the saved ``host.py`` build it);
    ``options`` (``threads``, ``providers``, ``session_options``, ``shared_pool``)
    as for ``dycl.load``. A backend that saves artifacts runs them with the host's
    own runtime, so the in-process model behaves as the saved one does."""
    timed, result.loaded = result.loaded, None  # loaded by the lower stage to time it: used once, or freed
    if timed is not None and not options and result.backend.standalone:
        return CompiledModel(timed, result.host_source, result)
    executable = None
    if not result.backend.standalone:  # it runs the live sub-DNN modules in this process

        def executable(name: str, data: bytes, entry: Any) -> Any:
            return result.backend.executable(data, entry, result.entry_modules[name])

    model = host_model(result.host_source, result.manifest, result.files, executable=executable, **options)
    return CompiledModel(model, result.host_source, result)


def load(directory: str | Path, threads: int | None = None, providers: list[Any] | None = None,
         session_options: Any = None, shared_pool: bool | None = None,
         specialize: bool | None = None) -> CompiledModel:
    """Load a saved artifact. The manifest (schema) and every file it lists, host.py
    included, are verified before anything in it runs (``dycl.artifact.verify``);
    an artifact is code all the same: load only artifacts you trust.

    ``threads`` (intra-op threads per session), ``providers`` and ``session_options``
    go to ONNX Runtime sessions; ``shared_pool=True`` opts in to one process-wide
    ONNX Runtime thread pool (faster; afterwards every ONNX Runtime session in the
    process must set ``use_per_session_threads=False``). Nothing process-wide
    changes otherwise, and any number of artifacts can be loaded side by side.
    ``specialize=False`` turns off ONNX Runtime sessions specialized to the input sizes
    that recur (also ``DYCL_ORT_SPECIALIZE=off``; ``dycl/backends/ort_runtime.py``)."""
    options = {"threads": threads, "providers": providers, "session_options": session_options,
               "shared_pool": shared_pool, "specialize": specialize}
    host_model, source = load_host(directory, **{k: v for k, v in options.items() if v is not None})
    return CompiledModel(host_model, source)
