"""The compiler's last typed hand-off: the ``Manifest`` of a compiled model, and
the constants file it lists.

Assumes the variants' files are compiled (``files``, by the names ``file_of``
gives each variant) and the host is emitted. Guarantees: the manifest lists
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
from typing import Any

import numpy as np
import torch

from dycl import outputs
from dycl.artifact_outputs import output_specs
from dycl.guard_alternatives import alternative_name
from dycl.hcfg.symbolic import SymbolicShapes
from dycl.hcfg.trace import Returned
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
    ShapeGuard,
    SubDNNEntry,
)
from dycl.per_sample import sample_inputs
from dycl.rewriter import RewrittenFunction
from dycl.rewriter.vocabulary import dtype_name
from dycl.signature import manifest_call
from dycl.subdnn import SubDNNModule, Variant


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def build_manifest(backend: str, rewritten: RewrittenFunction, call: dict[str, Any], example_args: tuple,
                   shapes: SymbolicShapes | None, symbolic: dict[str, torch.Tensor] | None,
                   variants: Sequence[Variant], file_of: Mapping[str, str], files: Mapping[str, bytes],
                   host_source: str, modules: Mapping[str, SubDNNModule], constants: Mapping[str, torch.Tensor],
                   output_spec: Any = None, per_sample: bool = False,
                   guards: Mapping[str, tuple[ShapeGuard, ...]] | None = None,
                   alternatives: Mapping[str, list[tuple[str, tuple[ShapeGuard, ...]]]] | None = None,
                   calling_thread: frozenset[str] = frozenset(),
                   written_inputs: tuple[str, ...] = (),
                   returns: Sequence[Returned] = ()) -> tuple[Manifest, dict[str, bytes]]:
    """``(manifest, files)``: the manifest of the compiled model and every file it
    lists but ``host.py`` (``files`` plus the constants file, if any). ``file_of``:
    variant name -> its file in ``files``; ``symbolic``: the symbolic example
    inputs ``shapes`` declared, by name; ``output_spec``: the framework's output
    tree (``dycl.outputs``), None for plain returns; ``per_sample``: the host takes a batch
    of samples, each run as the example's one (``dycl.per_sample``); ``calling_thread``: the
    files that run on the calling thread (``dycl.backends.onnx_cost``); ``returns``: what every
    explored path returned (``hcfg.trace.Returned``), which the output table describes."""
    files = dict(files)
    stored = None
    if constants:
        blob, table = pack_constants(constants)
        files[CONSTANTS_FILE] = blob
        stored = Constants(CONSTANTS_FILE, sha256(blob), table)
    inputs = input_ports(rewritten, example_args, shapes, symbolic)
    if per_sample:
        inputs = sample_inputs(inputs)
    manifest = Manifest(
        dycl_version=DYCL_VERSION,
        backend=backend,
        model=rewritten.qualname,
        inputs=inputs,
        host=FileEntry(HOST_FILE, sha256(host_source.encode())),
        sub_dnns=_entries(variants, file_of, files, guards or {}, alternatives or {}, calling_thread),
        call=manifest_call(call),
        dynamic_dims=dim_table(inputs),
        constants=stored,
        output=outputs.describe(output_spec) if output_spec is not None else None,
        per_sample=per_sample,
        written_inputs=written_inputs,
    )
    returned = output_specs(returns, manifest, shapes, rewritten.locations, state=rewritten.state)
    manifest = dataclasses.replace(manifest, outputs=returned)
    # what is written is what every loader reads back (a value outside the schema fails here, not at load)
    return Manifest.from_json(json.loads(manifest.to_bytes())), files


def _entries(variants: Sequence[Variant], file_of: Mapping[str, str], files: Mapping[str, bytes],
             guards: Mapping[str, tuple[ShapeGuard, ...]],
             alternatives: Mapping[str, list[tuple[str, tuple[ShapeGuard, ...]]]],
             calling_thread: frozenset[str]) -> dict[str, SubDNNEntry]:
    """The manifest's ``sub_dnns``: one entry per variant, and one per graph traced at
    another size (``dycl.guard_alternatives``), chained after it by ``otherwise``."""
    entries = {}
    for variant in variants:
        ports = _ports(variant.inputs), _ports(variant.outputs)
        chain = [(variant.name, file_of[variant.name], tuple(guards.get(variant.name, ())))]
        chain += [(alternative_name(variant.name, index), file, found)
                  for index, (file, found) in enumerate(alternatives.get(variant.name, []))]
        for position, (name, file, needed) in enumerate(chain):
            otherwise = chain[position + 1][0] if position + 1 < len(chain) else None
            entries[name] = SubDNNEntry(file, sha256(files[file]), *ports, needed, otherwise,
                                        1 if file in calling_thread else None)
    return entries


def _ports(ports: Sequence[Any]) -> tuple[Port, ...]:
    """The manifest's view of a variant's ports (``dycl.subdnn.Port``)."""
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


__all__ = ["build_manifest", "dim_table", "input_ports", "pack_constants", "sha256"]
