"""``dycl.compile`` as a list of stages, each a function of the previous stage's typed result:

    rewrite → build → optimize → explore → ports → compile → emit

- *rewrite*: the model's ``forward`` (and what it calls) as one flat function (``dycl.rewriter``);
- *build*: its HCFG, from one run of the statements over every path on the example (``hcfg.build``),
  which also observes what each sub-DNN wrote;
- *optimize*: constant outputs to the host (from *build*'s observations), sub-DNNs merged into
  their producers (``hcfg.optimize``);
- *explore*: the final graph run over every path once, concrete and symbolic layers together
  (``hcfg.trace``): each sub-DNN's example inputs and outputs and their symbolic shapes, and
  what every path returns (the manifest's outputs; nothing runs the model again to learn them);
- *ports*: each sub-DNN's compilable variants and their ports (``hcfg.variants``);
- *compile*: every distinct variant through the backend, once;
- *emit*: the host program, the manifest and the constants (``dycl.manifest_build``).

``run`` times every stage (``stats["stages"]``; ``stats["seconds"]`` keeps the four phases the
benchmarks report) and, with ``DYCL_DUMP=dir`` in the environment, writes each stage's result
as text to ``dir/<n>-<stage>.txt``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from dycl import per_sample as per_sample_mode
from dycl import rewriter, written_inputs
from dycl.artifact_outputs import provenance
from dycl.backends import get_backend
from dycl.backends.base import Backend
from dycl.backends.onnx_cost import runs_on_calling_thread
from dycl.backends.onnx_metadata import describe_onnx
from dycl.dynamic import DynamicSpec, dynamic_dims
from dycl.example_copy import ExampleSnapshot
from dycl.guard_alternatives import alternative_name, covered, other_size_variants, warn_no_alternative
from dycl.hcfg.build import Built, build
from dycl.hcfg.graph import HCFG
from dycl.hcfg.levers import ALL_ON, Levers
from dycl.hcfg.optimize import CONSTANTS, hoist_constants, merge_into_producers
from dycl.hcfg.ports import Variant
from dycl.hcfg.symbolic import SymbolicShapes
from dycl.hcfg.trace import Examples, Returned
from dycl.hcfg.trace import explore as explore_paths
from dycl.hcfg.variants import variants_of
from dycl.hostgen.emit import HostCodegen, call_specs
from dycl.hostgen.emit_batched import BatchedHostCodegen
from dycl.hostgen.manifest import Manifest, ShapeGuard
from dycl.library import decides_nothing, is_library_model, library_call, object_output, wraps_forward
from dycl.log import get_logger
from dycl.manifest_build import build_manifest, input_ports
from dycl.progress import Progress
from dycl.rewriter.collector import paused_collector
from dycl.rewriter.errors import UnsupportedError
from dycl.rewriter.hooks import forward_hooks
from dycl.signature import bind_example, call_description, example_arguments, flat_example
from dycl.state_sync import host_state, initial_state
from dycl.subdnn import SubDNNModule

_LOG = get_logger("compile")


@dataclass
class CompileResult:
    """Everything ``save`` writes, plus what the in-process model needs."""

    graph: HCFG
    rewritten: rewriter.RewrittenFunction
    backend: Backend
    host_source: str
    manifest: Manifest
    files: dict[str, bytes]
    modules: dict[str, SubDNNModule]
    constants: dict[str, torch.Tensor] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    output_spec: Any = None  # rebuilds the framework's output objects from what the host returns (dycl.outputs)


@dataclass(frozen=True)
class Options:
    """How to compile (see ``dycl.compile``); ``levers`` turns single optimisations off;
    ``per_sample`` compiles per-sample batched execution (``dycl.per_sample``)."""

    backend: str = "onnxruntime"
    optimize: bool = True
    progress: bool | None = None
    backend_options: dict[str, Any] | None = None
    dynamic: DynamicSpec = True
    levers: Levers = ALL_ON
    kwargs: dict[str, Any] | None = None
    per_sample: bool = False


@dataclass
class Job:
    """The input of the first stage: ``model(*example_input, **options.kwargs)``."""

    model: torch.nn.Module
    example_input: Any
    options: Options
    backend: Backend
    bar: Progress


@dataclass
class Frontend:
    """*rewrite*: the function to compile, its flat example arguments, and the call form the host accepts."""

    job: Job
    model: torch.nn.Module  # the model, or the wrapper calling a library model (dycl.library)
    rewritten: rewriter.RewrittenFunction
    example_args: tuple
    call: Any
    output_spec: Any
    written_inputs: tuple[str, ...] = ()  # inputs forward() updates in place (dycl.written_inputs)


@dataclass
class Graph:
    """*build* and *optimize*: the HCFG, what building it observed, and the hoisted constants."""

    front: Frontend
    built: Built
    graph: HCFG
    constants: dict[str, torch.Tensor] = field(default_factory=dict)


@dataclass
class Explored:
    """*explore*: every sub-DNN's examples (by index), the symbolic shapes of the inputs, and
    what every path returns (the manifest's outputs: ``dycl.artifact_outputs``)."""

    stage: Graph
    examples: dict[int, Examples]
    shapes: SymbolicShapes | None
    symbolic_inputs: dict[str, Any] | None
    returns: list[Returned] = field(default_factory=list)


@dataclass
class Ported:
    """*ports*: the compilable variants of every sub-DNN and the distinct ones among them."""

    explored: Explored
    variants: list[Variant]
    modules: dict[str, SubDNNModule]
    distinct: dict[str, Variant]  # identity -> the variant compiled for it


@dataclass
class Compiled:
    """*compile*: the backend's files, the file of every variant (by name) and the
    shape conditions each variant's graph needs (``dycl.shape_guards``; most need none)."""

    ported: Ported
    files: dict[str, bytes]
    file_of: dict[str, str]
    guards: dict[str, tuple[ShapeGuard, ...]] = field(default_factory=dict)
    #: variant name -> [(file, guards)] of its graphs traced at other sizes (``dycl.guard_alternatives``)
    alternatives: dict[str, list[tuple[str, tuple[ShapeGuard, ...]]]] = field(default_factory=dict)
    #: the files small enough to run on the calling thread (``dycl.backends.onnx_cost``)
    calling_thread: frozenset[str] = frozenset()


def rewrite(job: Job) -> Frontend:
    model, passed = job.model, bind_example(job.model, job.example_input, job.options.kwargs)
    positional = len(example_arguments(job.example_input))  # the model's hooks see them as args
    call, output_spec, rewritten = None, None, None
    if is_library_model(model):
        # a library forward behind a decorator (transformers' @can_return_tuple) is not rewritten: calling it
        # runs the decorator, and the trace refuses any data-dependent decision in it (hcfg.decisions)
        rewritten = None if wraps_forward(model) else rewriter.rewrite(model, example=passed, positional=positional)
        # hooks (see root_hooks) and inputs updated in place (dycl.written_inputs) need the rewritten forward
        traceable = rewritten is None or decides_nothing(rewritten) and not _written(rewritten, passed)
        if traceable and not forward_hooks(model):
            # library code with no data-dependent decision for this call: compile a call of it (dycl.library)
            library = library_call(model, passed)
            if library is not None:  # else a Python number in the output: the rewrite computes it per call
                model, passed, call, output_spec = library.wrapper, library.example, library.call, library.spec
            rewritten = None
    if rewritten is None or call is not None:
        # rewrite first: its checks (module-state writes, unsupported constructs) come before running the model
        rewritten = rewriter.rewrite(model, example=passed, positional=positional)
        returns = object_output(model, passed, _threaded_output(rewritten, model, passed)) if call is None else None
        if returns is not None:
            output_spec = returns.spec
            rewritten = rewriter.rewrite(model, example=passed, returns=returns, positional=positional)
    example_args = flat_example(rewritten, passed)
    written = _written(rewritten, passed)
    front = Frontend(job, model, written_inputs.returning_written(rewritten, written), example_args,
                     call or call_description(rewritten), output_spec, written)
    if job.options.per_sample and rewritten.state:
        raise UnsupportedError(f"per_sample=True with module state written in forward() "
                               f"({', '.join(s.path for s in rewritten.state)})", None,
                               "state shared by the samples of a batch has no per-sample meaning: compile "
                               "without per_sample")
    if job.options.per_sample:
        written_inputs.refuse_per_sample(written, rewritten)
        per_sample_mode.check_request(job.backend.name, front.example_args, list(rewritten.signature.parameters)[1:])
        per_sample_mode.check_outputs(output_spec)
    job.bar.step("rewritten")
    return front


def _written(rewritten: rewriter.RewrittenFunction, passed: dict[str, Any]) -> tuple[str, ...]:
    """The inputs ``rewritten`` updates in place (``dycl.written_inputs``) on the example ``passed``."""
    example_args = flat_example(rewritten, passed)
    return written_inputs.find(rewritten, {flat.name: value for flat, value in zip(rewritten.inputs, example_args)
                                           if isinstance(value, (torch.Tensor, dict, list, tuple))})


def _threaded_output(rewritten: rewriter.RewrittenFunction, model: torch.nn.Module,
                     passed: dict[str, Any]) -> Callable[[], Any] | None:
    """For a forward that writes module state, the example's output made by the rewritten
    function (which threads the state instead of writing it: ``rewriter.state_threading``)."""
    if not rewritten.state:
        return None
    return lambda: rewritten.compile()(model, *flat_example(rewritten, passed))[0]


def build_graph(front: Frontend) -> Graph:
    options = front.job.options
    built = build(front.rewritten, front.model, front.example_args, optimize=options.optimize, levers=options.levers)
    front.job.bar.step(f"{len(built.graph.sub_dnns)} sub-DNNs")
    return Graph(front, built, built.graph)


def optimize(stage: Graph) -> Graph:
    options = stage.front.job.options
    if not options.optimize:
        return stage
    graph, constants = hoist_constants(stage.graph, stage.built.output_examples())
    if options.levers.merge_into_producers:
        graph = merge_into_producers(graph)
    return Graph(stage.front, stage.built, graph, constants)


def explore(stage: Graph) -> Explored:
    front = stage.front
    rewritten = front.rewritten
    bound = rewritten.signature.bind(front.model, *front.example_args)
    bound.apply_defaults()
    initial = dict(bound.arguments)
    inputs = len(rewritten.inputs)  # module state after them keeps its shapes (rewriter.state_threading)
    declared = dynamic_dims(front.job.options.dynamic, list(rewritten.signature.parameters)[1:1 + inputs],
                            front.example_args[:inputs])
    if front.job.options.per_sample:
        declared = per_sample_mode.without_batch(declared)
    # symbolic even where no input dim is: a size that comes from data (nonzero, boolean indexing) always is
    shapes = SymbolicShapes()
    symbolic = {name: shapes.declare(value, declared.get(name, {}))
                for name, value in initial.items() if isinstance(value, torch.Tensor)}
    if stage.constants:
        initial[CONSTANTS] = stage.constants
    found = explore_paths(stage.graph, rewritten.globals, initial, shapes, symbolic, rewritten.locations,
                          stage.built.observations)
    front.job.bar.step("explored")
    return Explored(stage, found.examples, shapes, symbolic, found.returns)


def ports(explored: Explored) -> Ported:
    stage, front = explored.stage, explored.stage.front
    self_name = next(iter(front.rewritten.signature.parameters))
    variants: list[Variant] = []
    for sub in stage.graph.sub_dnns:
        if not explored.examples[sub.index].inputs:
            raise AssertionError(f"{sub.name} was never reached while tracing the example (a dycl bug)")
        variants += variants_of(sub, explored.examples[sub.index], explored.shapes, front.rewritten.locations)
    modules = {variant.name: SubDNNModule(front.model, variant, front.rewritten.globals, self_name,
                                          front.rewritten.locations).eval()
               for variant in variants}
    # identical sub-DNNs (same code, weights and ports) are compiled once and share a file
    distinct: dict[str, Variant] = {}
    for variant in variants:
        distinct.setdefault(_identity(front.job, variant), variant)
    return Ported(explored, variants, modules, distinct)


def compile_variants(ported: Ported) -> Compiled:
    job = ported.explored.stage.front.job
    chosen, distinct = job.backend, ported.distinct
    bar = Progress(f"export and compile {len(distinct)} sub-DNNs ({job.options.backend})", len(distinct),
                   job.options.progress)
    chosen.per_sample = job.options.per_sample  # a backend that builds from ONNX itself (TVM) builds group models
    with bar.active():
        compiled = chosen.compile_many([ported.modules[v.name] for v in distinct.values()], list(distinct.values()),
                                       bar.step)
    files: dict[str, bytes] = {}
    file_of: dict[str, str] = {}
    for (fingerprint, variant), data in zip(distinct.items(), compiled):
        file_of[fingerprint] = f"{variant.name}{chosen.file_suffix}"
        if chosen.file_suffix == ".onnx":
            shared = [v.name for v in ported.variants if _identity(job, v) == fingerprint]
            data = per_sample_mode.group_file(data, chosen.file_suffix) if job.options.per_sample else data
            data = describe_onnx(data, *provenance(variant, shared, ported.explored.stage.front.rewritten.qualname))
        files[file_of[fingerprint]] = data
    found = dict(chosen.guards)
    guards = {v.name: found.get(distinct[_identity(job, v)].name, ()) for v in ported.variants}
    if job.options.per_sample:
        _refuse_guards_per_sample(guards)
    alternatives = _other_size_graphs(chosen, ported, found, files)
    return Compiled(ported, files, {v.name: file_of[_identity(job, v)] for v in ported.variants}, guards,
                    {v.name: alternatives[_identity(job, v)] for v in ported.variants
                     if _identity(job, v) in alternatives},
                    _calling_thread(job, distinct, file_of, files))


def _calling_thread(job: Job, distinct: dict[str, Variant], file_of: dict[str, str],
                    files: dict[str, bytes]) -> frozenset[str]:
    """The ONNX files whose graphs are small at their example's shapes (``dycl.backends.onnx_cost``)."""
    if not job.options.levers.small_graphs_on_caller or job.options.per_sample or job.backend.name != "onnxruntime":
        return frozenset()
    small = set()
    for fingerprint, variant in distinct.items():
        example = dict(zip((port.name for port in variant.inputs), variant.examples[0]))
        shapes = {name: tuple(value.shape) for name, value in example.items() if isinstance(value, torch.Tensor)}
        if runs_on_calling_thread(files[file_of[fingerprint]], shapes):
            small.add(file_of[fingerprint])
    return frozenset(small)


def _other_size_graphs(chosen: Backend, ported: Ported, found: dict[str, tuple[ShapeGuard, ...]],
                       files: dict[str, bytes]) -> dict[str, list[tuple[str, tuple[ShapeGuard, ...]]]]:
    """For each distinct variant whose guards exclude a size of 1 (or 2, where traced at 1)
    along some dim, its graphs traced there (``dycl.guard_alternatives``), added to
    ``files``: fingerprint -> [(file, guards)]."""
    alternatives: dict[str, list[tuple[str, tuple[ShapeGuard, ...]]]] = {}
    for fingerprint, variant in ported.distinct.items():
        made_guards = [found.get(variant.name, ())]
        for other in other_size_variants(variant, found.get(variant.name, ())):
            if covered(other.examples[0], made_guards, variant.name):
                continue
            try:
                data = chosen.compile(ported.modules[variant.name], other)
            except Exception as error:  # noqa: BLE001 - e.g. library code that fails when traced at 1: the graphs
                warn_no_alternative(variant, other, error)  # compiled so far and their checks stand (a call
                continue  # no graph fits is refused by name); the warning says which sizes and why
            made = alternatives.setdefault(fingerprint, [])
            name = f"{alternative_name(variant.name, len(made))}{chosen.file_suffix}"
            files[name] = data
            made.append((name, tuple(chosen.guards.get(variant.name, ()))))
            made_guards.append(made[-1][1])
    return alternatives


def _refuse_guards_per_sample(guards: dict[str, tuple[ShapeGuard, ...]]) -> None:
    """Shape guards are checked on a sub-DNN's inputs as the host passes them; a
    per-sample host passes a group of samples, so the checks would read the wrong axes."""
    for needed in guards.values():
        if needed:
            raise UnsupportedError(
                f"per_sample=True with library code that decides on a symbolic size in Python (at "
                f"{needed[0].where}: {needed[0].holds})", None,
                "compile with the dims that code decides on static (dynamic=False or a dynamic= dict), "
                "or without per_sample")


def emit(compiled: Compiled) -> CompileResult:
    ported = compiled.ported
    explored = ported.explored
    stage = explored.stage
    front = stage.front
    rewritten, chosen, constants, files = front.rewritten, front.job.backend, stage.constants, compiled.files
    calls = call_specs(stage.graph, ported.variants)
    codegen, extra = HostCodegen, {}
    if front.job.options.per_sample:
        names = tuple(p.name for p in input_ports(rewritten, front.example_args, explored.shapes,
                                                   explored.symbolic_inputs))
        codegen, extra = BatchedHostCodegen, {"sample_inputs": names}
    host_source = codegen(stage.graph, calls, chosen.runtime, specialized=dict(rewritten.specialized),
                          call=front.call, globals=rewritten.globals, locations=rewritten.locations,
                          uses_constants=bool(constants), state=host_state(rewritten.state), **extra).emit()
    stored = {**constants, **initial_state(rewritten.state)}
    manifest, files = build_manifest(chosen.name, rewritten, front.call, front.example_args, explored.shapes,
                                     explored.symbolic_inputs, ported.variants, compiled.file_of, compiled.files,
                                     host_source, ported.modules, stored, front.output_spec,
                                     per_sample=front.job.options.per_sample, guards=compiled.guards,
                                     alternatives=compiled.alternatives, calling_thread=compiled.calling_thread,
                                     written_inputs=front.written_inputs, returns=explored.returns)
    stats = {
        "sub_dnns": len(stage.graph.sub_dnns),
        "constants": len(constants),
        "variants": len(ported.variants),
        "conditions": len(stage.graph.conditions),
        "unique_compiled": len(ported.distinct),
        "backend": dict(chosen.last_stats),
        "dynamic_dims": sorted(manifest.dynamic_dims),
        "symbolic_fallbacks": len(explored.shapes.failures) if explored.shapes else 0,
    }
    return CompileResult(stage.graph, rewritten, chosen, host_source, manifest, files, ported.modules, constants,
                         stats, front.output_spec)


#: the compiler, in order; each stage takes the previous one's result
STAGES: tuple[tuple[str, Callable[[Any], Any]], ...] = (
    ("rewrite", rewrite), ("build", build_graph), ("optimize", optimize), ("explore", explore),
    ("ports", ports), ("compile", compile_variants), ("emit", emit))
#: the stages that run with the cyclic garbage collector paused (``rewriter.collector``)
FRONT_END = frozenset({"rewrite", "build", "optimize", "explore"})
#: the phases ``stats["seconds"]`` reports (benchmarks/results.md): which stages each one sums
PHASES = {"rewrite": ("rewrite",), "hcfg": ("build", "optimize", "explore"), "compile": ("ports", "compile"),
          "host": ("emit",)}


def run(model: torch.nn.Module, example_input: Any, options: Options = Options()) -> CompileResult:
    """Compile ``model`` for the example call ``model(*example_input, **options.kwargs)`` by
    running ``STAGES`` in order; the input dims ``options.dynamic`` names (``dycl.dynamic``)
    are symbolic in every sub-DNN that depends on them."""
    job = Job(model, example_input, options, get_backend(options.backend, **(options.backend_options or {})),
              Progress("rewrite and HCFG", 3, options.progress))
    dump = os.environ.get("DYCL_DUMP")
    value: Any = job
    seconds: dict[str, float] = {}
    example = ExampleSnapshot.take((example_input, options.kwargs))  # each stage starts from the example's values
    for number, (name, stage) in enumerate(STAGES):
        start = time.perf_counter()
        with paused_collector() if name in FRONT_END else contextlib.nullcontext():
            value = stage(value)
        example.restore()
        seconds[name] = time.perf_counter() - start
        _LOG.debug("stage %s: %.3f s", name, seconds[name])  # dycl.log: the `dycl` logger, silent by default
        if dump:
            _dump(Path(dump) / f"{number}-{name}.txt", value)
    value.stats["stages"] = {name: round(spent, 4) for name, spent in seconds.items()}
    value.stats["seconds"] = {phase: round(sum(seconds[s] for s in stages), 4) for phase, stages in PHASES.items()}
    _LOG.info("compiled %s: %d sub-DNNs, %d conditions in %.2f s (%s backend)", type(model).__name__,
              value.stats.get("sub_dnns", 0), value.stats.get("conditions", 0), sum(seconds.values()), options.backend)
    return value


def compile_model(model: torch.nn.Module, example_input: Any, **options: Any) -> CompileResult:
    """``run`` with the options as keyword arguments (``Options``)."""
    return run(model, example_input, Options(**options))


def _identity(job: Job, variant: Variant) -> str:
    return variant.fingerprint() if job.options.levers.reuse_identical else variant.name


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _dump(path: Path, value: Any) -> None:
    """A stage's result as text, for reading what the compiler did (``DYCL_DUMP``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(value, Frontend):
        text = value.rewritten.source
    elif isinstance(value, Graph):
        text = value.graph.to_dot() + "".join(f"\nconstant {key}: {tuple(v.shape)}" for key, v in
                                              value.constants.items())
    elif isinstance(value, Explored):
        text = "\n".join(f"subdnn_{index}: {len(ex.inputs)} examples, inputs "
                         f"{[_shapes(v, value.shapes) for v in (ex.symbolic_inputs or ex.inputs)]}"
                         for index, ex in sorted(value.examples.items()))
    elif isinstance(value, Ported):
        text = "\n".join(f"{v.name}: {[p.to_json() for p in v.inputs]} -> {[p.to_json() for p in v.outputs]}"
                         for v in value.variants)
    elif isinstance(value, Compiled):
        text = json.dumps(value.file_of, indent=2, sort_keys=True)
    else:
        text = value.host_source
    path.write_text(text + "\n")


def _shapes(values: tuple[Any, ...], shapes: SymbolicShapes | None) -> list[Any]:
    return [shapes.shape(v) if shapes is not None else tuple(getattr(v, "shape", ())) or type(v).__name__
            for v in values]


__all__ = ["STAGES", "CompileResult", "Options", "compile_model", "run"]
