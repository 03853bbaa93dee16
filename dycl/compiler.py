"""``dycl.compile`` as a list of stages, each a function of the previous stage's typed result:

    rewrite → build → optimize → explore → ports → compile → lower → emit

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
- *lower*: where ``Levers.single_graph`` asks, the whole graph as one ONNX model with ``If`` nodes
  (``dycl.backends.single_graph_stage``; the variants as they were where it cannot be lowered);
- *emit*: the host program, the manifest and the constants (``dycl.artifact.manifest_build``).

The hand-offs are typed: the backend returns a ``CompiledVariant`` per variant (its file,
shape guards and graphs traced at other sizes), the call form is a ``CallForm``, one
``Levers`` says which optimisations run. How the compiled model executes is a mode
(``Job.mode``, ``dycl.execution_mode``): the stages call its hooks, and per-sample batching
(``dycl.per_sample.mode``) is one, not a flag each stage tests.

``run`` times every stage (``stats["stages"]``; ``stats["seconds"]`` keeps the four phases the
benchmarks report) and, with ``DYCL_DUMP=dir`` in the environment, writes each stage's result
as text to ``dir/<n>-<stage>.txt``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from dycl import rewriter
from dycl.artifact.manifest_build import build_manifest, entry_modules, input_ports
from dycl.artifact.outputs import provenance
from dycl.backends import get_backend
from dycl.backends.base import Backend, CompiledVariant, OnnxStep
from dycl.backends.example_sizes import example_sizes
from dycl.backends.onnx_metadata import describe_onnx
from dycl.backends.single_graph_stage import lower_stage
from dycl.backends.spin_choice import spinning_pays
from dycl.backends.thread_choice import on_calling_thread
from dycl.execution_mode import WHOLE_CALL, WholeCall
from dycl.export.alternatives import alternative_name, covered, other_size_variants, warn_no_alternative
from dycl.export.subdnn import SubDNNModule
from dycl.hcfg.build import Built, build
from dycl.hcfg.graph import HCFG
from dycl.hcfg.levers import ALL_ON, Levers
from dycl.hcfg.merge_renames import merge_across_renames
from dycl.hcfg.optimize import CONSTANTS, hoist_constants, merge_into_producers
from dycl.hcfg.ports import Variant
from dycl.hcfg.symbolic import SymbolicShapes
from dycl.hcfg.trace import Examples, Returned
from dycl.hcfg.trace import explore as explore_paths
from dycl.hcfg.variants import variants_of
from dycl.hostgen.decisions import Decisions
from dycl.hostgen.emit import call_specs
from dycl.hostgen.manifest import CallForm, Manifest, ShapeGuard
from dycl.hostgen.program import HostProgram
from dycl.in_process import written_inputs
from dycl.in_process.state_sync import host_state
from dycl.log import get_logger
from dycl.model.dynamic import DynamicSpec, dynamic_dims, static_sizes
from dycl.model.example_copy import ExampleSnapshot
from dycl.model.library import decides_nothing, is_library_model, library_call, object_output, wraps_forward
from dycl.model.library_decisions import to_follow
from dycl.model.records import Structure
from dycl.model.signature import bind_example, call_description, example_arguments, flat_example
from dycl.per_sample.mode import PER_SAMPLE
from dycl.per_sample.predicable_onnx import PredicationRefused
from dycl.progress import Progress
from dycl.rewriter.collector import paused_collector
from dycl.rewriter.errors import UnsupportedError
from dycl.rewriter.hooks import forward_hooks

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
    output_spec: Any = None  # rebuilds the framework's output objects from what the host returns (dycl.model.outputs)
    #: the sub-DNN module of every manifest entry: a variant's, and its graphs' traced at other sizes
    entry_modules: dict[str, SubDNNModule] = field(default_factory=dict)
    program: HostProgram | None = None  # what each line of the host is (hostgen.program); host_source is its source
    #: the *optimize* stage's result, from which ``compile_from`` compiles again with another ``dynamic``;
    #: it holds what the build walk saw, so ``dycl.compile`` drops it (None) once it has decided
    front_end: Graph | None = field(default=None, repr=False)
    #: the host model the lower stage loaded from this result with ``from_result``'s default options, to time it
    #: (``dycl.backends.single_graph_stage``); ``from_result`` takes it once instead of loading again
    loaded: Any = field(default=None, repr=False)


@dataclass(frozen=True)
class Options:
    """How to compile (see ``dycl.compile``); ``levers``, the one source of truth for the
    compile-time optimisations (``dycl.hcfg.levers``; ``dycl.compile(optimize=...)`` is
    ``Levers.of(optimize)``), turns single ones off; ``per_sample`` compiles per-sample batched
    execution (``dycl.per_sample``)."""

    backend: str = "onnxruntime"
    progress: bool | None = None
    backend_options: dict[str, Any] | None = None
    dynamic: DynamicSpec = True
    levers: Levers = ALL_ON
    kwargs: dict[str, Any] | None = None
    per_sample: bool = False
    #: library functions rewritten like user code (``compile_model``, ``dycl.model.library_decisions``)
    followed: frozenset = frozenset()


@dataclass
class Job:
    """The input of the first stage: ``model(*example_input, **options.kwargs)``."""

    model: torch.nn.Module
    example_input: Any
    options: Options
    backend: Backend
    bar: Progress

    @property
    def mode(self) -> WholeCall:
        """The execution mode whose hooks the stages call (``dycl.execution_mode``)."""
        return PER_SAMPLE if self.options.per_sample else WHOLE_CALL


@dataclass
class Frontend:
    """*rewrite*: the function to compile, its flat example arguments, and the call form the host accepts."""

    job: Job
    model: torch.nn.Module  # the model, or the wrapper calling a library model (dycl.model.library)
    rewritten: rewriter.RewrittenFunction
    example_args: tuple
    call: CallForm
    output_spec: Any
    written_inputs: tuple[str, ...] = ()  # inputs forward() updates in place (dycl.in_process.written_inputs)


@dataclass
class Graph:
    """*build* and *optimize*: the HCFG, what building it observed, and the hoisted constants."""

    front: Frontend
    built: Built
    graph: HCFG
    constants: dict[str, torch.Tensor] = field(default_factory=dict)
    #: seconds of the stages that made it, until a compile from it counts them (``compile_front``)
    seconds: dict[str, float] = field(default_factory=dict, repr=False)


@dataclass
class Explored:
    """*explore*: every sub-DNN's examples (by index), the symbolic shapes of the inputs, and
    what every path returns (the manifest's outputs: ``dycl.artifact.outputs``)."""

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
    identities: dict[str, str]  # variant name -> its identity (key of distinct)


@dataclass
class Compiled:
    """*compile*: every variant's compiled graph, by variant name; identical variants
    (``Levers.reuse_identical``) share one ``CompiledVariant``, and so one file."""

    ported: Ported
    variants: dict[str, CompiledVariant]
    #: what the backend's ``compile_many`` of the distinct variants did (its ``last_stats``, read right after)
    backend_stats: dict[str, Any] = field(default_factory=dict)
    #: the model's conditions as the host reports them where its graph is the whole model in one sub-DNN
    #: (``dycl.backends.single_graph_stage``; ``hostgen.decisions``), else None
    decisions: Decisions | None = None
    #: the *emit* stage's result of this very ``Compiled``, where the lower stage emitted it already (to time it)
    emitted: CompileResult | None = field(default=None, repr=False)

    @property
    def files(self) -> dict[str, bytes]:
        """Every file the variants put in the artifact, by name."""
        files: dict[str, bytes] = {}
        for compiled in self.variants.values():
            files.update(compiled.files)
        return files


def rewrite(job: Job) -> Frontend:
    model, passed = job.model, bind_example(job.model, job.example_input, job.options.kwargs)
    positional = len(example_arguments(job.example_input))  # the model's hooks see them as args
    call, output_spec, rewritten = None, None, None
    # library functions whose trace would bake a decision are rewritten like user code (compile_model)
    rewrite_model = functools.partial(rewriter.rewrite, followed=job.options.followed)
    own_call = functools.partial(rewrite_model, static_sizes=static_sizes(job.options.dynamic, passed))
    if is_library_model(model):
        # a library forward behind a decorator (transformers' @can_return_tuple) is not rewritten: calling it
        # runs the decorator, and the trace refuses any data-dependent decision in it (hcfg.decisions)
        rewritten = None if wraps_forward(model) else rewrite_model(model, example=passed, positional=positional)
        # hooks (see root_hooks) and inputs updated in place (dycl.in_process.written_inputs) need the rewritten forward
        traceable = rewritten is None or decides_nothing(rewritten) and not _written(rewritten, passed)
        if traceable and not forward_hooks(model):
            # library code with no data-dependent decision for this call: compile a call of it (dycl.model.library)
            library = library_call(model, passed)
            if library is not None:  # else a Python number in the output: the rewrite computes it per call
                model, passed, call, output_spec = library.wrapper, library.example, library.call, library.spec
            rewritten = None
    if rewritten is None or call is not None:
        # the model's own call knows which of its inputs' sizes the host checks (a library call's wrapper: not yet)
        rewrite_call = rewrite_model if call is not None else own_call
        # rewrite first: its checks (module-state writes, unsupported constructs) come before running the model
        rewritten = rewrite_call(model, example=passed, positional=positional)
        returns = object_output(model, passed, _threaded_output(rewritten, model, passed),
                                positional) if call is None else None
        if returns is not None:
            output_spec = returns.spec
            rewritten = rewrite_call(model, example=passed, returns=returns, positional=positional)
    example_args = flat_example(rewritten, passed)
    written = _written(rewritten, passed)
    returned = output_spec.returned if isinstance(output_spec, Structure) else ()  # a cache updated, returned
    front = Frontend(job, model, written_inputs.returning_written(rewritten, written), example_args,
                     call or call_description(rewritten, returned), output_spec, written)
    job.mode.check_front(front)
    job.bar.step("rewritten")
    return front


def _written(rewritten: rewriter.RewrittenFunction, passed: dict[str, Any]) -> tuple[str, ...]:
    """The inputs ``rewritten`` updates in place (``dycl.in_process.written_inputs``) on the example ``passed``."""
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
    built = build(front.rewritten, front.model, front.example_args, front.job.options.levers)
    front.job.bar.step(f"{len(built.graph.sub_dnns)} sub-DNNs")
    return Graph(front, built, built.graph)


def optimize(stage: Graph) -> Graph:
    options = stage.front.job.options
    if not options.levers.optimize_graph:
        return stage
    graph, constants = hoist_constants(stage.graph, stage.built.output_examples())
    if options.levers.merge_across_renames:
        graph = merge_across_renames(graph)
    if options.levers.merge_into_producers:
        graph = merge_into_producers(graph)
    graph = stage.front.job.mode.optimize_graph(graph, stage.built, _declared(stage.front), options.levers)
    return Graph(stage.front, stage.built, graph, constants)


def _declared(front: Frontend) -> dict[str, dict[int, str]]:
    """The inputs' symbolic dims each sub-DNN is compiled for (name -> axis -> dim)."""
    rewritten = front.rewritten
    inputs = len(rewritten.inputs)  # module state after them keeps its shapes (rewriter.state_threading)
    groups = {name if key is None else key: [flat.name for flat in rewritten.inputs if flat.parameter == name
                                             and isinstance(flat.key, tuple) and flat.key[0] == key]
              for name, key in rewritten.structures}  # dynamic= names a cache as the caller passes it
    declared = dynamic_dims(front.job.options.dynamic, list(rewritten.signature.parameters)[1:1 + inputs],
                            front.example_args[:inputs], groups)
    return front.job.mode.declared_dims(declared)


def explore(stage: Graph) -> Explored:
    front = stage.front
    rewritten = front.rewritten
    bound = rewritten.signature.bind(front.model, *front.example_args)
    bound.apply_defaults()
    initial = dict(bound.arguments)
    declared = _declared(front)
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
    identities = {variant.name: _identity(front.job, variant) for variant in variants}  # each printed once
    distinct: dict[str, Variant] = {}
    for variant in variants:
        distinct.setdefault(identities[variant.name], variant)
    return Ported(explored, variants, modules, distinct, identities)


def compile_variants(ported: Ported) -> Compiled:
    job = ported.explored.stage.front.job
    chosen, distinct = job.backend, ported.distinct
    bar = Progress(f"export and compile {len(distinct)} sub-DNNs ({job.options.backend})", len(distinct),
                   job.options.progress)
    step = job.mode.onnx_step(chosen)  # per_sample: each graph's group model, for ONNX Runtime and TVM alike
    with bar.active():
        made = chosen.compile_many([ported.modules[v.name] for v in distinct.values()], list(distinct.values()),
                                   bar.step, onnx_step=step)
    backend_stats = dict(chosen.last_stats)  # before the graphs traced at other sizes compile
    by_identity = dict(zip(distinct, made))
    job.mode.check_compiled(by_identity)
    settled: dict[str, bool] = {}  # thread choices by graph structure, this compile's (thread_choice)
    by_identity = _spinning(ported, {fingerprint: _finished(ported, fingerprint, compiled, step, settled)
                                     for fingerprint, compiled in by_identity.items()})
    return Compiled(ported, {v.name: by_identity[ported.identities[v.name]] for v in ported.variants}, backend_stats)


def _finished(ported: Ported, fingerprint: str, compiled: CompiledVariant, step: OnnxStep | None,
              settled: dict[str, bool]) -> CompiledVariant:
    """A distinct variant's compiled graph with what the compiler adds: an ONNX file's
    provenance (``dycl.backends.onnx_metadata``), its graphs traced at other sizes, and
    whether it is small enough for the calling thread."""
    job = ported.explored.stage.front.job
    variant = ported.distinct[fingerprint]
    if job.backend.file_suffix == ".onnx":
        shared = [v.name for v in ported.variants if ported.identities[v.name] == fingerprint]
        compiled = dataclasses.replace(compiled, data=describe_onnx(
            compiled.data, *provenance(variant, shared, ported.explored.stage.front.rewritten.qualname)),
            example_sizes=example_sizes(compiled.data, variant))
    alternatives = _other_size_graphs(job.backend, ported.modules[variant.name], variant, compiled.guards, step)
    return dataclasses.replace(compiled, alternatives=alternatives,
                               on_calling_thread=_on_calling_thread(job, variant, compiled, settled))


def _on_calling_thread(job: Job, variant: Variant, compiled: CompiledVariant, settled: dict[str, bool]) -> bool:
    """Whether an ONNX file's graph runs on the calling thread, by its cost at its example
    (``dycl.backends.thread_choice``)."""
    if not (job.options.levers.small_graphs_on_caller and job.mode.small_graphs_on_caller
            and job.backend.file_suffix == ".onnx"):
        return False
    feeds = job.mode.serving_feeds(compiled.data, dict(zip((port.name for port in variant.inputs),
                                                           variant.examples[0])))
    return feeds is not None and on_calling_thread(compiled.data, feeds, settled=settled)


def _spinning(ported: Ported, by_identity: dict[str, CompiledVariant]) -> dict[str, CompiledVariant]:
    """``by_identity`` with every graph's pool spinning within runs where the mode times it and
    the chain of graphs ran faster so (``dycl.backends.spin_choice``)."""
    job = ported.explored.stage.front.job
    if not (job.mode.times_spinning and job.backend.file_suffix == ".onnx"):
        return by_identity
    graphs = [(compiled.data, dict(zip((port.name for port in ported.distinct[fingerprint].inputs),
                                       ported.distinct[fingerprint].examples[0])), compiled.on_calling_thread)
              for fingerprint, compiled in by_identity.items()]
    if not spinning_pays(graphs):
        return by_identity
    return {fingerprint: dataclasses.replace(compiled, spins_in_run=not compiled.on_calling_thread)
            for fingerprint, compiled in by_identity.items()}


def _other_size_graphs(chosen: Backend, module: SubDNNModule, variant: Variant, guards: tuple[ShapeGuard, ...],
                       step: OnnxStep | None) -> tuple[CompiledVariant, ...]:
    """Where ``variant``'s guards exclude a size of 1 (or 2, where traced at 1) along some
    dim, its graphs traced there (``dycl.export.alternatives``), each in a file of its own."""
    made: list[CompiledVariant] = []
    for other in other_size_variants(variant, guards):
        if covered(other.examples[0], [guards, *(graph.guards for graph in made)], variant.name):
            continue
        try:
            graph = chosen.compile(module, other, step)
        except Exception as error:  # noqa: BLE001 - e.g. library code that fails when traced at 1: the graphs
            warn_no_alternative(variant, other, error)  # compiled so far and their checks stand (a call
            continue  # no graph fits is refused by name); the warning says which sizes and why
        made.append(dataclasses.replace(graph, file=f"{alternative_name(variant.name, len(made))}{chosen.file_suffix}"))
    return tuple(made)


def emit(compiled: Compiled) -> CompileResult:
    if compiled.emitted is not None:  # the lower stage emitted (and loaded) it to time it
        return compiled.emitted
    ported = compiled.ported
    explored = ported.explored
    stage = explored.stage
    front = stage.front
    rewritten, chosen, constants = front.rewritten, front.job.backend, stage.constants
    calls = call_specs(stage.graph, ported.variants)
    inputs = input_ports(rewritten, front.example_args, explored.shapes, explored.symbolic_inputs)
    codegen, extra = front.job.mode.host_codegen(inputs)
    program = codegen(stage.graph, calls, chosen.runtime, specialized=dict(rewritten.specialized),
                      call=front.call, globals=rewritten.globals, locations=rewritten.locations,
                      uses_constants=bool(constants), state=host_state(rewritten.state),
                      decisions=compiled.decisions, **extra).program()
    host_source = program.source
    manifest, files = build_manifest(compiled, host_source)
    stats = {
        "sub_dnns": len(stage.graph.sub_dnns),
        "constants": len(constants),
        "variants": len(ported.variants),
        # the model's conditions, also where the one graph computes them (``hostgen.decisions``)
        "conditions": len(compiled.decisions.conditions) if compiled.decisions else len(stage.graph.conditions),
        "unique_compiled": len(ported.distinct),
        "backend": compiled.backend_stats,
        # what the lower stage chose (dycl.backends.single_graph_stage)
        "single_graph": compiled.backend_stats.get("single_graph", {"mode": "off", "chosen": "host"}),
        "dynamic_dims": sorted(manifest.dynamic_dims),
        "symbolic_fallbacks": len(explored.shapes.failures) if explored.shapes else 0,
        **front.job.mode.graph_stats(stage.graph),
    }
    return CompileResult(stage.graph, rewritten, chosen, host_source, manifest, files, ported.modules, constants,
                         stats, front.output_spec, entry_modules(compiled), program)


def lower(compiled: Compiled) -> Compiled:
    """*lower*: the whole graph as one ONNX model where ``Levers.single_graph`` asks
    (``dycl.backends.single_graph_stage``)."""
    return lower_stage(compiled, emit)


#: the compiler, in order; each stage takes the previous one's result
STAGES: tuple[tuple[str, Callable[[Any], Any]], ...] = (
    ("rewrite", rewrite), ("build", build_graph), ("optimize", optimize), ("explore", explore),
    ("ports", ports), ("compile", compile_variants), ("lower", lower), ("emit", emit))
#: the stages that run with the cyclic garbage collector paused (``rewriter.collector``)
FRONT_END = frozenset({"rewrite", "build", "optimize", "explore"})
#: the stages whose result ``CompileResult.front_end`` is: only *rewrite* reads ``Options.dynamic``, for the
#: input sizes the host checks (``rewriter.tensor_rows``), which ``dynamic=False`` only adds to (``compile_from``)
BEFORE_EXPLORE = ("rewrite", "build", "optimize")
#: the phases ``stats["seconds"]`` reports (benchmarks/results.md): which stages each one sums
PHASES = {"rewrite": ("rewrite",), "hcfg": ("build", "optimize", "explore"), "compile": ("ports", "compile", "lower"),
          "host": ("emit",)}


def run(model: torch.nn.Module, example_input: Any, options: Options = Options(),
        front_end: Graph | None = None, front_only: bool = False) -> Any:
    """Compile ``model`` for the example call ``model(*example_input, **options.kwargs)`` by
    running ``STAGES`` in order; the input dims ``options.dynamic`` names (``dycl.model.dynamic``)
    are symbolic in every sub-DNN that depends on them. With ``front_end`` (see ``compile_from``)
    the stages ``BEFORE_EXPLORE`` are not run again: their result is ``front_end``, for this job.
    ``front_only``: stop there and return that ``Graph`` (``compile_front``)."""
    unfinished = front_end.front.job.bar if front_end is not None else None  # compile_front's, 2 of 3 steps
    bar = unfinished if unfinished is not None and unfinished.done < unfinished.total else Progress(
        "rewrite and HCFG", 3, options.progress)
    job = Job(model, example_input, options, get_backend(options.backend, **(options.backend_options or {})), bar)
    dump = os.environ.get("DYCL_DUMP")
    value: Any = job if front_end is None else _for_job(front_end, job)
    seconds: dict[str, float] = {}
    example = ExampleSnapshot.take((example_input, options.kwargs))  # each stage starts from the example's values
    for number, (name, stage) in enumerate(STAGES):
        if front_end is not None and name in BEFORE_EXPLORE:
            seconds[name] = front_end.seconds.pop(name, 0.0)  # paid once, by the first compile from it
            continue
        if name == "explore":
            if front_only:
                value.seconds = seconds
                return value
            front_end = value
        start = time.perf_counter()
        with paused_collector() if name in FRONT_END else contextlib.nullcontext():
            value = stage(value)
        example.restore()
        seconds[name] = time.perf_counter() - start
        _LOG.debug("stage %s: %.3f s", name, seconds[name])  # dycl.log: the `dycl` logger, silent by default
        if dump:
            _dump(Path(dump) / f"{number}-{name}.txt", value)
    value.front_end = front_end
    value.stats["stages"] = {name: round(spent, 4) for name, spent in seconds.items()}
    value.stats["seconds"] = {phase: round(sum(seconds[s] for s in stages), 4) for phase, stages in PHASES.items()}
    _LOG.info("compiled %s: %d sub-DNNs, %d conditions in %.2f s (%s backend)", type(model).__name__,
              value.stats.get("sub_dnns", 0), value.stats.get("conditions", 0), sum(seconds.values()), options.backend)
    return value


#: how many times a compile starts again following more library code
MAX_FOLLOW_ROUNDS = 4


def compile_model(model: torch.nn.Module, example_input: Any, **options: Any) -> CompileResult:
    """``run`` with the options as keyword arguments (``Options``); see ``_following``."""
    return _following(model, example_input, Options(**options), front_only=False)


def compile_front(model: torch.nn.Module, example_input: Any, **options: Any) -> Graph:
    """The stages ``BEFORE_EXPLORE`` of ``compile_model`` (following library code where they
    refuse, as it does): the front end that ``compile_from`` compiles for a ``dynamic`` decided
    after it (``dycl.compile``: whether the batch must be static, ``dycl.model.batch_check``)."""
    return _following(model, example_input, Options(**options), front_only=True)


def _following(model: torch.nn.Module, example_input: Any, chosen: Options, front_only: bool) -> Any:
    """``run`` (to the front end only, with ``front_only``), again where it refuses.

    Where the trace refuses a data-dependent decision made in library code, the compile
    starts again with that library code followed: rewritten like user code, with every
    library function that leads to it (``dycl.model.library_decisions``), at most
    ``MAX_FOLLOW_ROUNDS`` times; a refusal that following does not change is raised, after one
    more try without ``merge_across_renames`` where that lever was on (a merged graph the exporter
    cannot translate: GRUCell gates after a row repeated by the batch)."""
    first: UnsupportedError | None = None
    example = ExampleSnapshot.take((example_input, chosen.kwargs))  # a failed run may stop mid-stage
    declined: PredicationRefused | None = None
    for _ in range(MAX_FOLLOW_ROUNDS):
        try:
            return _declined(run(model, example_input, chosen, front_only=front_only), declined)
        except UnsupportedError as error:
            example.restore()
            if isinstance(error, PredicationRefused) and chosen.levers.predicate:
                # if-conversion is an optimisation: where a converted graph may fail on a sample that
                # took the other branch, or costs more than the routing it saves, the conditions stay routed
                declined = error
                chosen = dataclasses.replace(chosen, levers=dataclasses.replace(chosen.levers, predicate=False))
                continue
            more = to_follow(model, example_arguments(example_input), chosen.kwargs, error)
            if more <= chosen.followed and chosen.levers.merge_across_renames:
                # a merge is an optimisation: where a merged graph cannot be exported (the exporter's
                # shape inference loses a dim the boundary kept), the boundaries stay
                chosen = dataclasses.replace(chosen, levers=dataclasses.replace(chosen.levers,
                                                                                merge_across_renames=False))
                continue
            if more <= chosen.followed:
                if first is None:
                    raise
                raise _after_following(first, error) from error
            first = first or error
            example.restore()
            chosen = dataclasses.replace(chosen, followed=chosen.followed | more)
    return _declined(run(model, example_input, chosen, front_only=front_only), declined)


def _declined(result: Any, declined: PredicationRefused | None) -> Any:
    """``result``, its ``stats["per_sample"]`` saying why if-conversion was declined, if it was
    (a front end, ``front_only``, has no stats)."""
    if declined is not None and isinstance(result, CompileResult):
        result.stats.setdefault("per_sample", {})["predication_declined"] = declined.construct
    return result


def compile_from(front_end: Graph, dynamic: DynamicSpec) -> CompileResult:
    """The compile ``front_end`` (a ``CompileResult.front_end``, or ``compile_front``'s) was made for, with
    ``dynamic`` instead: the same model, example and options, so the stages ``BEFORE_EXPLORE``,
    which read ``dynamic`` only for sizes that ``dynamic=False`` keeps static too, would make ``front_end``
    again; they are not run (the build
    walk's real run of the model included). A refusal in a later stage compiles from the start
    (``compile_model``, which may follow more library code)."""
    job = front_end.front.job
    options = dataclasses.replace(job.options, dynamic=dynamic)
    if dynamic is not False and dynamic != job.options.dynamic:  # may make a size symbolic the rewrite unrolled
        return compile_model(job.model, job.example_input, **_fields(options))
    example = ExampleSnapshot.take((job.example_input, options.kwargs))
    front_end.built.observations.new_walk()  # the earlier compile's result is dropped (see Observations)
    try:
        return run(job.model, job.example_input, options, front_end)
    except UnsupportedError as error:
        example.restore()
        if isinstance(error, PredicationRefused):  # the front end is if-converted: from the start, routed
            return _declined(compile_model(job.model, job.example_input, **_fields(options, predicate=False)), error)
        return compile_model(job.model, job.example_input, **_fields(options))


def _fields(options: Options, **levers: Any) -> dict[str, Any]:
    """``options`` as ``compile_model``'s keyword arguments, ``levers`` replaced."""
    fields = {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}
    if levers:
        fields["levers"] = dataclasses.replace(options.levers, **levers)
    return fields


def _for_job(front_end: Graph, job: Job) -> Graph:
    """``front_end`` as the result of ``job``'s stages ``BEFORE_EXPLORE``: the later stages read the job from it."""
    return dataclasses.replace(front_end, front=dataclasses.replace(front_end.front, job=job))


def _after_following(refused: UnsupportedError, stopped: UnsupportedError) -> UnsupportedError:
    """The first refusal (the library's decision, the user's question), saying where following
    that library code stopped."""
    return UnsupportedError(refused.construct, refused.location,
                            f"{refused.hint}; dycl rewrote the library code that leads to this line and stopped "
                            f"at {stopped.location or 'an unknown line'}: {stopped.construct}")


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
        text = json.dumps({name: compiled.file for name, compiled in value.variants.items()}, indent=2, sort_keys=True)
    else:
        text = value.host_source
    path.write_text(text + "\n")


def _shapes(values: tuple[Any, ...], shapes: SymbolicShapes | None) -> list[Any]:
    return [shapes.shape(v) if shapes is not None else tuple(getattr(v, "shape", ())) or type(v).__name__
            for v in values]


__all__ = ["STAGES", "CompileResult", "Options", "compile_from", "compile_model", "run"]
