"""``dycl.compile`` as a list of stages, each a function of the previous stage's typed result:

    rewrite → build → optimize → explore → ports → compile → emit

- *rewrite*: the model's ``forward`` (and what it calls) as one flat function (``dycl.rewriter``);
- *build*: its HCFG, from one run of the statements over every path on the example (``hcfg.build``),
  which also observes what each sub-DNN wrote;
- *optimize*: constant outputs to the host (from *build*'s observations), sub-DNNs merged into
  their producers (``hcfg.optimize``);
- *explore*: the final graph run over every path once, concrete and symbolic layers together
  (``hcfg.trace``): each sub-DNN's example inputs and outputs and their symbolic shapes;
- *ports*: each sub-DNN's compilable variants and their ports (``dycl.subdnn``);
- *compile*: every distinct variant through the backend, once;
- *emit*: the host program, the manifest and the constants.

``run`` times every stage (``stats["stages"]``; ``stats["seconds"]`` keeps the four phases the
benchmarks report) and, with ``DYCL_DUMP=dir`` in the environment, writes each stage's result
as text to ``dir/<n>-<stage>.txt``.
"""

from __future__ import annotations

import hashlib
import json
import linecache
import os
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dycl import outputs, rewriter
from dycl.artifact_outputs import output_specs, provenance
from dycl.backends import get_backend
from dycl.backends.base import Backend, compile_all
from dycl.backends.onnx_metadata import describe_onnx
from dycl.dynamic import DynamicSpec, dynamic_dims
from dycl.hcfg.build import Built, build
from dycl.hcfg.graph import HCFG
from dycl.hcfg.levers import ALL_ON, Levers
from dycl.hcfg.optimize import CONSTANTS, hoist_constants, merge_into_producers
from dycl.hcfg.symbolic import SymbolicShapes
from dycl.hcfg.trace import Examples, trace_examples
from dycl.hostgen.artifact_check import CONSTANTS_MAGIC
from dycl.hostgen.emit import CallSpec, HostCodegen
from dycl.library import decides_nothing, is_library_model, library_call, object_output
from dycl.progress import Progress
from dycl.signature import bind_example, call_description, flat_example, manifest_call
from dycl.subdnn import SubDNNModule, Variant, variants_of

VERSION = "0.1.0"


@dataclass
class CompileResult:
    """Everything ``save`` writes, plus what the in-process model needs."""

    graph: HCFG
    rewritten: rewriter.RewrittenFunction
    backend: Backend
    host_source: str
    manifest: dict[str, Any]
    files: dict[str, bytes]
    modules: dict[str, SubDNNModule]
    constants: dict[str, torch.Tensor] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    output_spec: Any = None  # rebuilds the framework's output objects from what the host returns (dycl.outputs)


@dataclass(frozen=True)
class Options:
    """How to compile (see ``dycl.compile``); ``levers`` turns single optimisations off."""

    backend: str = "onnxruntime"
    optimize: bool = True
    progress: bool | None = None
    backend_options: dict[str, Any] | None = None
    dynamic: DynamicSpec = True
    levers: Levers = ALL_ON
    kwargs: dict[str, Any] | None = None


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


@dataclass
class Graph:
    """*build* and *optimize*: the HCFG, what building it observed, and the hoisted constants."""

    front: Frontend
    built: Built
    graph: HCFG
    constants: dict[str, torch.Tensor] = field(default_factory=dict)


@dataclass
class Explored:
    """*explore*: every sub-DNN's examples (by index) and the symbolic shapes of the inputs."""

    stage: Graph
    examples: dict[int, Examples]
    shapes: SymbolicShapes | None
    symbolic_inputs: dict[str, Any] | None


@dataclass
class Ported:
    """*ports*: the compilable variants of every sub-DNN and the distinct ones among them."""

    explored: Explored
    variants: list[Variant]
    modules: dict[str, SubDNNModule]
    distinct: dict[str, Variant]  # identity -> the variant compiled for it


@dataclass
class Compiled:
    """*compile*: the backend's files and every variant's manifest entry."""

    ported: Ported
    files: dict[str, bytes]
    entries: dict[str, dict[str, Any]]


def rewrite(job: Job) -> Frontend:
    model, passed = job.model, bind_example(job.model, job.example_input, job.options.kwargs)
    call, output_spec, rewritten = None, None, None
    if is_library_model(model):
        rewritten = rewriter.rewrite(model, example=passed)
        if decides_nothing(rewritten):
            # library code with no data-dependent decision for this call: compile a call of it (dycl.library)
            library = library_call(model, passed)
            model, passed, call, output_spec = library.wrapper, library.example, library.call, library.spec
            rewritten = None
    if rewritten is None or call is not None:
        # rewrite first: its checks (module-state writes, unsupported constructs) come before running the model
        rewritten = rewriter.rewrite(model, example=passed)
        returns = object_output(model, passed) if call is None else None
        if returns is not None:
            output_spec = returns.spec
            rewritten = rewriter.rewrite(model, example=passed, returns=returns)
    front = Frontend(job, model, rewritten, flat_example(rewritten, passed), call or call_description(rewritten),
                     output_spec)
    job.bar.step("rewritten")
    return front


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
    declared = dynamic_dims(front.job.options.dynamic, list(rewritten.signature.parameters)[1:], front.example_args)
    shapes = SymbolicShapes() if declared else None
    symbolic = None
    if shapes is not None:
        symbolic = {name: shapes.declare(value, declared.get(name, {}))
                    for name, value in initial.items() if isinstance(value, torch.Tensor)}
    if stage.constants:
        initial[CONSTANTS] = stage.constants
    examples = trace_examples(stage.graph, rewritten.globals, initial, shapes, symbolic, rewritten.locations,
                              stage.built.observations)
    front.job.bar.step("explored")
    return Explored(stage, examples, shapes, symbolic)


def ports(explored: Explored) -> Ported:
    stage, front = explored.stage, explored.stage.front
    self_name = next(iter(front.rewritten.signature.parameters))
    variants: list[Variant] = []
    for sub in stage.graph.sub_dnns:
        if not explored.examples[sub.index].inputs:
            raise AssertionError(f"{sub.name} was never reached while tracing the example (a dycl bug)")
        variants += variants_of(sub, explored.examples[sub.index], explored.shapes)
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
    with bar.active():
        compiled = compile_all(chosen, [ported.modules[v.name] for v in distinct.values()], list(distinct.values()),
                               bar.step)
    files: dict[str, bytes] = {}
    file_of: dict[str, str] = {}
    for (fingerprint, variant), data in zip(distinct.items(), compiled):
        file_of[fingerprint] = f"{variant.name}{chosen.file_suffix}"
        if chosen.file_suffix == ".onnx":
            shared = [v.name for v in ported.variants if _identity(job, v) == fingerprint]
            data = describe_onnx(data, *provenance(variant, shared, ported.explored.stage.front.rewritten.qualname))
        files[file_of[fingerprint]] = data
    entries: dict[str, dict[str, Any]] = {}
    for variant in ported.variants:
        file_name = file_of[_identity(job, variant)]
        entries[variant.name] = {
            "file": file_name,
            "sha256": _sha256(files[file_name]),
            "inputs": [p.to_json() for p in variant.inputs],
            "outputs": [p.to_json() for p in variant.outputs],
        }
    return Compiled(ported, files, entries)


def emit(compiled: Compiled) -> CompileResult:
    ported = compiled.ported
    explored = ported.explored
    stage = explored.stage
    front = stage.front
    rewritten, chosen, constants, files = front.rewritten, front.job.backend, stage.constants, compiled.files
    calls = _call_specs(stage.graph, ported.variants)
    inputs = _input_specs(rewritten, front.example_args, explored.shapes, explored.symbolic_inputs)
    host_source = HostCodegen(stage.graph, calls, chosen.runtime, specialized=dict(rewritten.specialized),
                              call=front.call, globals=rewritten.globals,
                              locations=rewritten.locations,
                              uses_constants=bool(constants)).emit()
    manifest = {
        "dycl_version": VERSION,
        "backend": chosen.name,
        "model": rewritten.qualname,
        "inputs": inputs,
        "call": manifest_call(front.call),
        "dynamic_dims": _dim_table(inputs),
        "host": {"file": "host.py", "sha256": _sha256(host_source.encode())},
        "sub_dnns": compiled.entries,
    }
    manifest["outputs"] = output_specs(host_source, manifest, ported.modules, constants, front.example_args,
                                       dict(rewritten.specialized))
    if front.output_spec is not None:
        manifest["output"] = outputs.describe(front.output_spec)
    if constants:
        blob, table = pack_constants(constants)
        files[CONSTANTS_FILE] = blob
        manifest["constants"] = {"file": CONSTANTS_FILE, "sha256": _sha256(blob), "arrays": table}
    stats = {
        "sub_dnns": len(stage.graph.sub_dnns),
        "constants": len(constants),
        "variants": len(ported.variants),
        "conditions": len(stage.graph.conditions),
        "unique_compiled": len(ported.distinct),
        "backend": dict(getattr(chosen, "last_stats", {})),
        "dynamic_dims": sorted(_dim_table(inputs)),
        "symbolic_fallbacks": len(explored.shapes.failures) if explored.shapes else 0,
    }
    return CompileResult(stage.graph, rewritten, chosen, host_source, manifest, files, ported.modules, constants,
                         stats, front.output_spec)


#: the compiler, in order; each stage takes the previous one's result
STAGES: tuple[tuple[str, Callable[[Any], Any]], ...] = (
    ("rewrite", rewrite), ("build", build_graph), ("optimize", optimize), ("explore", explore),
    ("ports", ports), ("compile", compile_variants), ("emit", emit))
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
    for number, (name, stage) in enumerate(STAGES):
        start = time.perf_counter()
        value = stage(value)
        seconds[name] = time.perf_counter() - start
        if dump:
            _dump(Path(dump) / f"{number}-{name}.txt", value)
    value.stats["stages"] = {name: round(spent, 4) for name, spent in seconds.items()}
    value.stats["seconds"] = {phase: round(sum(seconds[s] for s in stages), 4) for phase, stages in PHASES.items()}
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
        text = json.dumps(value.entries, indent=2, sort_keys=True)
    else:
        text = value.host_source
    path.write_text(text + "\n")


def _shapes(values: tuple[Any, ...], shapes: SymbolicShapes | None) -> list[Any]:
    return [shapes.shape(v) if shapes is not None else tuple(getattr(v, "shape", ())) or type(v).__name__
            for v in values]


CONSTANTS_FILE = "constants.bin"


def pack_constants(constants: dict[str, torch.Tensor]) -> tuple[bytes, dict[str, dict[str, Any]]]:
    """All constant arrays in one file, 64-byte aligned; the table says where each one
    is (offsets from the data section). The file starts with its own copy of the
    table, so that the checksum covers it (``hostgen.artifact_check.constant_layout``)."""
    data = bytearray()
    table = {}
    for key in sorted(constants):
        array = np.ascontiguousarray(constants[key].numpy())
        offset = (len(data) + 63) // 64 * 64
        data.extend(b"\0" * (offset - len(data)))
        data.extend(array.tobytes())
        table[key] = {"offset": offset, "dtype": str(array.dtype), "shape": list(array.shape)}
    header = CONSTANTS_MAGIC + json.dumps(table, sort_keys=True).encode() + b"\n"
    header += b"\0" * (-len(header) % 64)
    return header + bytes(data), table


def _call_specs(graph: HCFG, variants: list[Variant]) -> dict[int, CallSpec]:
    by_sub: dict[int, list[Variant]] = {}
    for variant in variants:
        by_sub.setdefault(variant.sub.index, []).append(variant)
    specs = {}
    for sub in graph.sub_dnns:
        own = by_sub[sub.index]
        first = own[0]
        if first.output_lengths:
            raise rewriter.UnsupportedError(f"a sub-DNN returning a list ({sorted(first.output_lengths)})", None)
        scalars = tuple(p.name for p in first.outputs if p.kind != "tensor")
        specs[sub.index] = CallSpec({v.key: v.name for v in own}, tuple(first.list_lengths), scalars)
    return specs


def _input_specs(rewritten: rewriter.RewrittenFunction, example_args: tuple, shapes: SymbolicShapes | None,
                 symbolic: dict[str, torch.Tensor] | None) -> list[dict[str, Any]]:
    """The manifest's input table: a symbolic dim by its name, or the number
    shape propagation proved it to be."""
    names = list(rewritten.signature.parameters)[1:]
    specs = []
    for name, value in zip(names, example_args):
        if isinstance(value, torch.Tensor):
            shape = list(value.shape)
            if shapes is not None and name in (symbolic or {}):
                shape = list(shapes.shape(symbolic[name]))
            specs.append({"name": name, "kind": "tensor", "dtype": str(value.dtype).removeprefix("torch."),
                          "shape": shape})
    return specs


def _dim_table(inputs: list[dict[str, Any]]) -> dict[str, list[list[Any]]]:
    """Symbolic dim name -> the [input, axis] pairs that carry it."""
    table: dict[str, list[list[Any]]] = {}
    for spec in inputs:
        for axis, dim in enumerate(spec["shape"]):
            if isinstance(dim, str):
                table.setdefault(dim, []).append([spec["name"], axis])
    return table


def load_host_module(source: str, name: str = "dycl_host") -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = f"<{name}-{_sha256(source.encode())[:12]}>"
    # tracebacks (and the host's own error messages) show the generated lines
    linecache.cache[module.__file__] = (len(source), None, source.splitlines(keepends=True), module.__file__)
    exec(compile(source, module.__file__, "exec"), module.__dict__)  # noqa: S102 - our generated host
    return module


def manifest_bytes(manifest: dict[str, Any]) -> bytes:
    return (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()


__all__ = ["STAGES", "CompileResult", "Options", "compile_model", "load_host_module", "manifest_bytes", "run"]
