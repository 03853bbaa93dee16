"""``dycl.compile``: rewrite → HCFG → compile every sub-DNN → generate the host."""

from __future__ import annotations

import hashlib
import json
import linecache
import time
import types
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from dycl import outputs, rewriter
from dycl import per_sample as per_sample_mode
from dycl.artifact_outputs import output_specs, provenance
from dycl.backends import get_backend
from dycl.backends.base import Backend, compile_all
from dycl.backends.onnx_metadata import describe_onnx
from dycl.dynamic import DynamicSpec, dynamic_dims
from dycl.hcfg.build import build_hcfg
from dycl.hcfg.graph import HCFG
from dycl.hcfg.levers import ALL_ON, Levers
from dycl.hcfg.optimize import CONSTANTS, hoist_constants, merge_into_producers
from dycl.hcfg.symbolic import SymbolicShapes
from dycl.hcfg.trace import trace_examples
from dycl.hostgen.artifact_check import CONSTANTS_MAGIC
from dycl.hostgen.emit import CallSpec, HostCodegen
from dycl.hostgen.emit_batched import BatchedHostCodegen
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
        variants += variants_of(sub, examples[sub.index], shapes)
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
    entries: dict[str, dict[str, Any]] = {}
    for variant in variants:
        file_name = file_of[identity(variant)]
        entries[variant.name] = {
            "file": file_name,
            "sha256": _sha256(files[file_name]),
            "inputs": [p.to_json() for p in variant.inputs],
            "outputs": [p.to_json() for p in variant.outputs],
        }
    seconds["compile"] = time.perf_counter() - start

    start = time.perf_counter()
    calls = _call_specs(graph, variants)
    inputs = _input_specs(rewritten, example_args, shapes, symbolic_initial)
    codegen, options = HostCodegen, {}
    if per_sample:
        inputs = per_sample_mode.sample_inputs(inputs)
        codegen, options = BatchedHostCodegen, {"sample_inputs": tuple(spec["name"] for spec in inputs)}
    host_source = codegen(graph, calls, chosen.runtime, specialized=dict(rewritten.specialized),
                          call=call, globals=rewritten.globals,
                          locations=rewritten.locations,
                          uses_constants=bool(constants), **options).emit()
    manifest = {
        "dycl_version": VERSION,
        "backend": chosen.name,
        "model": rewritten.qualname,
        "inputs": inputs,
        "call": manifest_call(call),
        "dynamic_dims": _dim_table(inputs),
        "host": {"file": "host.py", "sha256": _sha256(host_source.encode())},
        "sub_dnns": entries,
    }
    if per_sample:
        manifest["per_sample"] = True
    manifest["outputs"] = output_specs(host_source, manifest, modules, constants, example_args,
                                       dict(rewritten.specialized))
    if output_spec is not None:
        manifest["output"] = outputs.describe(output_spec)
    if constants:
        blob, table = pack_constants(constants)
        files[CONSTANTS_FILE] = blob
        manifest["constants"] = {"file": CONSTANTS_FILE, "sha256": _sha256(blob), "arrays": table}
    seconds["host"] = time.perf_counter() - start
    stats = {
        "sub_dnns": len(graph.sub_dnns),
        "constants": len(constants),
        "variants": len(variants),
        "conditions": len(graph.conditions),
        "unique_compiled": len(distinct),
        "backend": dict(getattr(chosen, "last_stats", {})),
        "dynamic_dims": sorted(_dim_table(inputs)),
        "symbolic_fallbacks": len(shapes.failures) if shapes else 0,
        "seconds": {k: round(v, 4) for k, v in seconds.items()},
    }
    return CompileResult(graph, rewritten, chosen, host_source, manifest, files, modules, constants, stats,
                         output_spec)


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


__all__ = ["compile_model", "CompileResult", "load_host_module", "manifest_bytes"]
