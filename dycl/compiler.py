"""``dycl.compile``: rewrite → HCFG → compile every sub-DNN → generate the host."""

from __future__ import annotations

import hashlib
import linecache
import time
import types
from dataclasses import dataclass, field
from typing import Any

import torch

from dycl import per_sample as per_sample_mode
from dycl import rewriter
from dycl.artifact_outputs import provenance
from dycl.backends import get_backend
from dycl.backends.base import Backend, compile_all
from dycl.backends.onnx_metadata import describe_onnx
from dycl.dynamic import DynamicSpec, dynamic_dims
from dycl.hcfg.build import build_hcfg
from dycl.hcfg.graph import HCFG
from dycl.hcfg.levers import ALL_ON, Levers
from dycl.hcfg.optimize import CONSTANTS, hoist_constants, merge_into_producers
from dycl.hcfg.ports import Variant
from dycl.hcfg.symbolic import SymbolicShapes
from dycl.hcfg.trace import trace_examples
from dycl.hcfg.variants import variants_of
from dycl.hostgen.emit import HostCodegen, call_specs
from dycl.hostgen.emit_batched import BatchedHostCodegen
from dycl.hostgen.manifest import Manifest
from dycl.library import decides_nothing, is_library_model, library_call, object_output, wraps_forward
from dycl.manifest_build import build_manifest, input_ports
from dycl.progress import Progress
from dycl.signature import bind_example, call_description, flat_example
from dycl.subdnn import SubDNNModule


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


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def compile_model(model: torch.nn.Module, example_input: Any, backend: str = "onnxruntime",
                  optimize: bool = True, progress: bool | None = None,
                  backend_options: dict[str, Any] | None = None, dynamic: DynamicSpec = True,
                  levers: Levers = ALL_ON, kwargs: dict[str, Any] | None = None,
                  per_sample: bool = False) -> CompileResult:
    """Compile ``model`` for the example call ``model(*example_input, **kwargs)``; the
    input dims ``dynamic`` names (``dycl.dynamic``) are symbolic in every sub-DNN
    that depends on them. ``levers`` turns single optimisations off (for measuring them).
    ``per_sample`` compiles per-sample batched execution (``dycl.per_sample``)."""
    chosen = get_backend(backend, **(backend_options or {}))
    passed = bind_example(model, example_input, kwargs)
    seconds: dict[str, float] = {}

    start = time.perf_counter()
    call, output_spec, returns, rewritten = None, None, None, None
    if is_library_model(model):
        # a library forward behind a decorator (transformers' @can_return_tuple) is not rewritten: calling it
        # runs the decorator, and the trace refuses any data-dependent decision in it (hcfg.decisions)
        rewritten = None if wraps_forward(model) else rewriter.rewrite(model, example=passed)
        if rewritten is None or decides_nothing(rewritten):
            # library code with no data-dependent decision for this call: compile a call of it (dycl.library)
            library = library_call(model, passed)
            if library is not None:  # else a Python number in the output: the rewrite computes it per call
                model, passed, call, output_spec = library.wrapper, library.example, library.call, library.spec
            rewritten = None
    if rewritten is None or call is not None:
        # rewrite first: its checks (module-state writes, unsupported constructs) come before running the model
        rewritten = rewriter.rewrite(model, example=passed)
        returns = object_output(model, passed) if call is None else None
        if returns is not None:
            output_spec = returns.spec
            rewritten = rewriter.rewrite(model, example=passed, returns=returns)
    example_args = flat_example(rewritten, passed)
    call = call or call_description(rewritten)
    seconds["rewrite"] = time.perf_counter() - start
    stages = Progress("rewrite and HCFG", 3 if optimize else 2, progress)
    stages.step("rewritten")

    start = time.perf_counter()
    graph = build_hcfg(rewritten, model, example_args, optimize=optimize, levers=levers)
    bound = rewritten.signature.bind(model, *example_args)
    bound.apply_defaults()
    self_name = next(iter(rewritten.signature.parameters))
    initial = dict(bound.arguments)
    declared = dynamic_dims(dynamic, list(rewritten.signature.parameters)[1:], example_args)
    if per_sample:
        per_sample_mode.check_request(chosen.name, example_args, list(rewritten.signature.parameters)[1:])
        per_sample_mode.check_outputs(output_spec)
        declared = per_sample_mode.without_batch(declared)
    shapes = SymbolicShapes() if declared else None
    symbolic_initial = None
    if shapes is not None:
        symbolic_initial = {name: shapes.declare(value, declared.get(name, {}))
                            for name, value in initial.items() if isinstance(value, torch.Tensor)}
    constants: dict[str, torch.Tensor] = {}
    stages.step(f"{len(graph.sub_dnns)} sub-DNNs")
    if optimize:
        examples = trace_examples(graph, rewritten.globals, initial, locations=rewritten.locations)
        graph, constants = hoist_constants(graph, examples)
        if levers.merge_into_producers:
            graph = merge_into_producers(graph)
        initial = {**initial, CONSTANTS: constants}
        stages.step("optimized")
    examples = trace_examples(graph, rewritten.globals, initial, shapes, symbolic_initial, rewritten.locations)
    seconds["hcfg"] = time.perf_counter() - start

    start = time.perf_counter()
    variants: list[Variant] = []
    for sub in graph.sub_dnns:
        if not examples[sub.index].inputs:
            raise AssertionError(f"{sub.name} was never reached while tracing the example (a dycl bug)")
        variants += variants_of(sub, examples[sub.index], shapes, rewritten.locations)
    modules = {variant.name: SubDNNModule(model, variant, rewritten.globals, self_name, rewritten.locations).eval()
               for variant in variants}

    def identity(variant: Variant) -> str:
        return variant.fingerprint() if levers.reuse_identical else variant.name

    # identical sub-DNNs (same code, weights and ports) are compiled once and share a file
    distinct: dict[str, Variant] = {}
    for variant in variants:
        distinct.setdefault(identity(variant), variant)
    bar = Progress(f"export and compile {len(distinct)} sub-DNNs ({backend})", len(distinct), progress)
    with bar.active():
        compiled = compile_all(chosen, [modules[v.name] for v in distinct.values()], list(distinct.values()), bar.step)
    files: dict[str, bytes] = {}
    file_of: dict[str, str] = {}
    for (fingerprint, variant), data in zip(distinct.items(), compiled):
        file_of[fingerprint] = f"{variant.name}{chosen.file_suffix}"
        if chosen.file_suffix == ".onnx":
            shared = [v.name for v in variants if identity(v) == fingerprint]
            data = per_sample_mode.group_file(data, chosen.file_suffix) if per_sample else data
            data = describe_onnx(data, *provenance(variant, shared, rewritten.qualname))
        files[file_of[fingerprint]] = data
    seconds["compile"] = time.perf_counter() - start

    start = time.perf_counter()
    calls = call_specs(graph, variants)
    codegen, options = HostCodegen, {}
    if per_sample:
        names = tuple(p.name for p in input_ports(rewritten, example_args, shapes, symbolic_initial))
        codegen, options = BatchedHostCodegen, {"sample_inputs": names}
    host_source = codegen(graph, calls, chosen.runtime, specialized=dict(rewritten.specialized),
                          call=call, globals=rewritten.globals,
                          locations=rewritten.locations,
                          uses_constants=bool(constants), **options).emit()
    manifest, files = build_manifest(chosen.name, rewritten, call, example_args, shapes, symbolic_initial, variants,
                                     {v.name: file_of[identity(v)] for v in variants}, files, host_source, modules,
                                     constants, output_spec, per_sample=per_sample)
    seconds["host"] = time.perf_counter() - start
    stats = {
        "sub_dnns": len(graph.sub_dnns),
        "constants": len(constants),
        "variants": len(variants),
        "conditions": len(graph.conditions),
        "unique_compiled": len(distinct),
        "backend": dict(getattr(chosen, "last_stats", {})),
        "dynamic_dims": sorted(manifest.dynamic_dims),
        "symbolic_fallbacks": len(shapes.failures) if shapes else 0,
        "seconds": {k: round(v, 4) for k, v in seconds.items()},
    }
    return CompileResult(graph, rewritten, chosen, host_source, manifest, files, modules, constants, stats,
                         output_spec)


def load_host_module(source: str, name: str = "dycl_host") -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = f"<{name}-{_sha256(source.encode())[:12]}>"
    # tracebacks (and the host's own error messages) show the generated lines
    linecache.cache[module.__file__] = (len(source), None, source.splitlines(keepends=True), module.__file__)
    # dont_inherit: compiled as host.py is, without this module's __future__ flags (string annotations
    # would send dataclasses looking for the module in sys.modules, where it is deliberately absent)
    exec(compile(source, module.__file__, "exec", dont_inherit=True), module.__dict__)  # noqa: S102 - our host
    return module


__all__ = ["compile_model", "CompileResult", "load_host_module"]
