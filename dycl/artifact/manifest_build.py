"""The compiler's last typed hand-off: the ``Manifest`` of a compiled model, and
the constants file it lists.

Assumes the variants are compiled (``dycl.compiler.Compiled``: each variant's
``CompiledVariant``, its file and its graphs traced at other sizes) and the host is
emitted. Guarantees: the manifest lists
every variant with the checksum of its file, the model's inputs with symbolic
dims by name (a dim shape propagation proved static by its number), what the
model returns for the example, and, when there are constants, the constants file
with a table that equals the copy inside the (checksummed) file
(``hostgen.artifact_check.constant_layout`` checks both at load).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from dycl.artifact.outputs import output_specs
from dycl.export.alternatives import alternative_name
from dycl.export.subdnn import SubDNNModule, Variant
from dycl.hcfg.symbolic import SymbolicShapes
from dycl.hostgen.manifest import (
    CONSTANTS_FILE,
    CONSTANTS_MAGIC,
    DYCL_VERSION,
    HOST_FILE,
    ConstantArray,
    Constants,
    FileEntry,
    Manifest,
    Port,
    SubDNNEntry,
)
from dycl.in_process.state_sync import initial_state
from dycl.model import outputs
from dycl.rewriter import RewrittenFunction
from dycl.rewriter.vocabulary import dtype_name

if TYPE_CHECKING:  # the compiler imports this module
    from dycl.backends.base import CompiledVariant
    from dycl.compiler import Compiled


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def build_manifest(compiled: Compiled, host_source: str) -> tuple[Manifest, dict[str, bytes]]:
    """``(manifest, files)``: the manifest of the compiled model whose host is ``host_source``,
    and every file it lists but ``host.py`` (the variants' files plus the constants file, if
    any). The execution mode (``dycl.execution_mode``) says whether the host takes a batch of
    samples and what its input table is."""
    ported = compiled.ported
    explored, front = ported.explored, ported.explored.stage.front
    rewritten, mode = front.rewritten, front.job.mode
    files = compiled.files
    constants = {**explored.stage.constants, **initial_state(rewritten.state)}
    stored = None
    if constants:
        blob, table = pack_constants(constants)
        files[CONSTANTS_FILE] = blob
        stored = Constants(CONSTANTS_FILE, sha256(blob), table)
    inputs = mode.manifest_inputs(input_ports(rewritten, front.example_args, explored.shapes,
                                              explored.symbolic_inputs))
    manifest = Manifest(
        dycl_version=DYCL_VERSION,
        backend=front.job.backend.name,
        model=rewritten.qualname,
        inputs=inputs,
        host=FileEntry(HOST_FILE, sha256(host_source.encode())),
        sub_dnns=_entries(ported.variants, compiled.variants, files),
        call=front.call,
        dynamic_dims=dim_table(inputs),
        constants=stored,
        output=outputs.describe(front.output_spec) if front.output_spec is not None else None,
        per_sample=mode.per_sample,
        written_inputs=front.written_inputs,
    )
    returned = output_specs(explored.returns, manifest, explored.shapes, rewritten.locations, state=rewritten.state)
    manifest = dataclasses.replace(manifest, outputs=returned)
    # what is written is what every loader reads back (a value outside the schema fails here, not at load)
    return Manifest.from_json(json.loads(manifest.to_bytes())), files


def entry_modules(compiled: Compiled) -> dict[str, SubDNNModule]:
    """The sub-DNN module of every manifest entry: a variant's own, and the same module for
    each of its graphs traced at other sizes (``dycl.export.alternatives``)."""
    modules = {}
    for variant in compiled.ported.variants:
        module = compiled.ported.modules[variant.name]
        modules[variant.name] = module
        for index, _ in enumerate(compiled.variants[variant.name].alternatives):
            modules[alternative_name(variant.name, index)] = module
    return modules


def _entries(variants: Sequence[Variant], compiled: Mapping[str, CompiledVariant],
             files: Mapping[str, bytes]) -> dict[str, SubDNNEntry]:
    """The manifest's ``sub_dnns``: one entry per variant, and one per graph traced at
    another size (``dycl.export.alternatives``), chained after it by ``otherwise``."""
    entries = {}
    for variant in variants:
        ports = _ports(variant.inputs), _ports(variant.outputs)
        made = compiled[variant.name]
        chain = [(variant.name, made)]
        chain += [(alternative_name(variant.name, index), other) for index, other in enumerate(made.alternatives)]
        for position, (name, graph) in enumerate(chain):
            otherwise = chain[position + 1][0] if position + 1 < len(chain) else None
            entries[name] = SubDNNEntry(graph.file, sha256(files[graph.file]), *ports, graph.guards, otherwise,
                                        1 if graph.on_calling_thread else None, dict(graph.example_sizes) or None,
                                        True if graph.spins_in_run else None)
    return entries


def _ports(ports: Sequence[Any]) -> tuple[Port, ...]:
    """The manifest's view of a variant's ports (``dycl.export.subdnn.Port``)."""
    return tuple(Port(p.name, p.kind, p.dtype, tuple(p.shape)) for p in ports)


def input_ports(rewritten: RewrittenFunction, example_args: tuple, shapes: SymbolicShapes | None,
                symbolic: dict[str, torch.Tensor] | None) -> tuple[Port, ...]:
    """The model's tensor inputs: a symbolic dim by its name, or the number shape
    propagation proved it to be."""
    names = list(rewritten.signature.parameters)[1:]
    ports = []
    for name, value in zip(names, example_args):
        if isinstance(value, torch.Tensor):
            shape = tuple(value.shape)
            if shapes is not None and name in (symbolic or {}):
                shape = tuple(shapes.shape(symbolic[name]))
            ports.append(Port(name, "tensor", dtype_name(value.dtype), shape))
    return tuple(ports)


def dim_table(inputs: Sequence[Port]) -> dict[str, tuple[tuple[str, int], ...]]:
    """Symbolic dim name -> the ``(input, axis)`` pairs that carry it."""
    table: dict[str, list[tuple[str, int]]] = {}
    for port in inputs:
        for axis, dim in enumerate(port.shape):
            if isinstance(dim, str):
                table.setdefault(dim, []).append((port.name, axis))
    return {name: tuple(uses) for name, uses in table.items()}


def pack_constants(constants: Mapping[str, torch.Tensor]) -> tuple[bytes, dict[str, ConstantArray]]:
    """All constant arrays in one file, 64-byte aligned; the table says where each one
    is (offsets from the data section). The file starts with its own copy of the
    table, so that the checksum covers it (``hostgen.artifact_check.constant_layout``)."""
    data = bytearray()
    table = {}
    for key in sorted(constants):
        value = constants[key].numpy()
        array = np.ascontiguousarray(value).reshape(value.shape)  # ascontiguousarray makes a 0-d array 1-d
        offset = (len(data) + 63) // 64 * 64
        data.extend(b"\0" * (offset - len(data)))
        data.extend(array.tobytes())
        table[key] = ConstantArray(offset, str(array.dtype), tuple(array.shape))
    header = CONSTANTS_MAGIC + json.dumps({key: array.to_json() for key, array in table.items()},
                                          sort_keys=True).encode() + b"\n"
    header += b"\0" * (-len(header) % 64)
    return header + bytes(data), table


__all__ = ["build_manifest", "dim_table", "entry_modules", "input_ports", "pack_constants", "sha256"]
