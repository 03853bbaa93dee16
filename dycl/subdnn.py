"""Each sub-DNN as an ``nn.Module`` over flat tensor inputs and outputs.

A sub-DNN's inputs may be tensors, Python scalars (passed as 0-d tensors) or
Python lists of tensors (passed element by element). Lists of different
lengths reach the same sub-DNN on different paths (``torch.stack(tokens)``
after a decoding loop), so a sub-DNN has one *variant* per tuple of list
lengths; the host picks the variant from ``len()`` of its lists. Within a
variant a dimension is symbolic when the symbolic shape propagation
(``hcfg.symbolic``) says so — named by its expression over the user's dynamic
dims, so equal dims share a name across sub-DNNs — or when it differs between
examples (the predecessors of a join disagree): then it gets a fresh name.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import libcst as cst
import numpy as np
import torch

from dycl.hcfg.graph import SubDNN
from dycl.hcfg.trace import Examples
from dycl.rewriter.errors import SourceLocation, UnsupportedError
from dycl.rewriter.locations import LocationTable
from dycl.rewriter.vocabulary import dtype_name
from dycl.rewriter.walk import bound_names
from dycl.size_numbers import exact_size_statements

if TYPE_CHECKING:
    from dycl.hcfg.symbolic import SymbolicShapes

_SCALAR_DTYPES = {bool: "bool", int: "int64", float: "float32"}


@dataclass(frozen=True)
class Port:
    """One flat input or output: ``kind`` is "tensor" or the Python scalar type
    ("int", "float", "bool") it carries; symbolic dims are strings."""

    name: str
    kind: str
    dtype: str
    shape: tuple[int | str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "dtype": self.dtype, "shape": list(self.shape)}


@dataclass(frozen=True)
class Variant:
    """One compilable form of a sub-DNN."""

    sub: SubDNN
    key: tuple[int, ...]
    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]
    examples: tuple[tuple[torch.Tensor, ...], ...]
    list_lengths: dict[str, int]
    output_lengths: dict[str, int]

    @property
    def name(self) -> str:
        suffix = "_".join(str(k) for k in self.key)
        return f"{self.sub.name}_{suffix}" if self.key else self.sub.name

    def fingerprint(self) -> str:
        """Identical statements over identical input ports: the same compiled artifact."""
        text = cst.Module(list(self.sub.statements)).code
        body = "\n".join(_strip_comment(line) for line in text.splitlines())
        ports = repr([(p.kind, p.dtype, p.shape) for p in self.inputs]) + repr(
            [(p.kind, p.dtype, p.shape) for p in self.outputs])
        signature = repr((self.sub.inputs, self.sub.outputs, self.list_lengths))
        return hashlib.sha256((body + ports + signature).encode()).hexdigest()[:16]


def _strip_comment(line: str) -> str:
    return line.split("  # ")[0].rstrip()


def _flat(name: str, value: Any, where: SubDNN) -> list[tuple[str, str, Any]]:
    """(port name, kind, tensor) for one variable's value."""
    if isinstance(value, torch.Tensor):
        return [(name, "tensor", value)]
    if isinstance(value, bool | int | float) and not isinstance(value, np.generic):
        kind = type(value).__name__
        return [(name, kind, torch.tensor(value, dtype=getattr(torch, _SCALAR_DTYPES[type(value)])))]
    if isinstance(value, list | tuple) and all(isinstance(v, torch.Tensor) for v in value):
        return [(f"{name}_{i}", "tensor", v) for i, v in enumerate(value)]
    raise UnsupportedError(f"a value of type {type(value).__name__} passed between sub-DNNs ({name})", None,
                           "sub-DNNs exchange tensors, Python numbers and lists of tensors")


def _flat_shapes(values: tuple[Any, ...], count: int, shapes: SymbolicShapes) -> list[tuple | None]:
    """The named symbolic shape of every flat port of ``values`` (None for a scalar)."""
    flat: list[tuple | None] = []
    for value in values:
        items = value if isinstance(value, list | tuple) else [value]
        flat += [shapes.shape(item) for item in items]
    return flat if len(flat) == count else [None] * count


def variants_of(sub: SubDNN, examples: Examples, shapes: SymbolicShapes | None = None) -> list[Variant]:
    """Group a sub-DNN's examples by list lengths; name each port's dims (see the module note)."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, values in enumerate(examples.inputs):
        key = tuple(len(v) for v in values if isinstance(v, list | tuple))
        groups.setdefault(key, []).append(i)
    variants = []
    for key, members in sorted(groups.items()):
        flat_inputs = [[port for name, value in zip(sub.inputs, examples.inputs[i]) for port in _flat(name, value, sub)]
                       for i in members]
        flat_outputs = [[port for name, value in zip(sub.outputs, examples.outputs[i])
                         for port in _flat(name, value, sub)] for i in members]
        named_inputs = named_outputs = None
        if shapes is not None and examples.symbolic_inputs:
            named_inputs = [_flat_shapes(examples.symbolic_inputs[i], len(flat_inputs[0]), shapes) for i in members]
            named_outputs = [_flat_shapes(examples.symbolic_outputs[i], len(flat_outputs[0]), shapes)
                             for i in members]
        prefix = sub.name + ("_" + "_".join(map(str, key)) if key else "")
        inputs = _ports(flat_inputs, prefix, "in", named_inputs)
        # ONNX names every value once: an output may not share its input's name.
        outputs = tuple(replace(p, name=f"{p.name}:out") for p in _ports(flat_outputs, prefix, "out", named_outputs))
        list_lengths = {name: len(v) for name, v in zip(sub.inputs, examples.inputs[members[0]])
                        if isinstance(v, list | tuple)}
        output_lengths = {name: len(v) for name, v in zip(sub.outputs, examples.outputs[members[0]])
                          if isinstance(v, list | tuple)}
        examples_flat = tuple(tuple(t for _, _, t in flat) for flat in flat_inputs)
        variants.append(Variant(sub, key, inputs, outputs, examples_flat, list_lengths, output_lengths))
    return variants


def _ports(flat_examples: list[list[tuple[str, str, Any]]], prefix: str, role: str,
           named: list[list[tuple | None]] | None = None) -> tuple[Port, ...]:
    first = flat_examples[0]
    ports = []
    for position, (name, kind, tensor) in enumerate(first):
        shapes = [tuple(example[position][2].shape) for example in flat_examples]
        symbolic = [example[position] for example in named] if named else []
        dims: list[int | str] = []
        for axis, size in enumerate(shapes[0]):
            same = all(len(s) == len(shapes[0]) and s[axis] == size for s in shapes)
            fresh = f"{prefix}_{role}{position}_d{axis}"
            if symbolic and all(s is not None and len(s) == len(shapes[0]) for s in symbolic):
                # one expression on every path: its name; predecessors that disagree: a fresh name
                agreed = {s[axis] for s in symbolic}
                dims.append(agreed.pop() if len(agreed) == 1 and same else fresh)
            else:
                dims.append(size if same else fresh)
        ports.append(Port(name, kind, dtype_name(tensor.dtype), tuple(dims)))
    return tuple(ports)


class SubDNNModule(torch.nn.Module):
    """``forward(*flat_inputs) -> tuple(flat_outputs)`` running the sub-DNN's
    statements over the original model's parameters (no copies)."""

    def __init__(self, model: torch.nn.Module, variant: Variant, globals_: dict[str, Any],
                 self_name: str, locations: LocationTable | None = None) -> None:
        super().__init__()
        self.model = model
        self.variant = variant
        self._locations = locations or LocationTable()
        namespace: dict[str, Any] = dict(globals_)
        local = {n for s in variant.sub.statements for n in bound_names(s)} | set(variant.sub.inputs) | {self_name}
        numbers = {p.name for p in variant.inputs if p.kind != "tensor"}
        statements = exact_size_statements(variant.sub.statements, namespace, local, numbers,
                                           self._locations.resolve)  # sizes as Python numbers, exact in the trace
        source, self._line_of_statement = _function_source(variant, self_name, statements)
        self.filename = f"<dycl-{variant.name}>"
        exec(compile(source, self.filename, "exec"), namespace)  # noqa: S102 - generated
        self.function = namespace["_subdnn"]
        self.source = source

    def statement_at(self, line: int) -> cst.SimpleStatementLine:
        """The statement on ``line`` of ``source`` (the last one for the closing ``return``)."""
        statements = self.variant.sub.statements
        index = 0
        for i, first in enumerate(self._line_of_statement):
            if first <= line:
                index = i
        return statements[index]

    def location_of(self, statement: cst.CSTNode) -> SourceLocation | None:
        """The user's file:line of one of this sub-DNN's statements."""
        return self._locations.resolve(statement)

    def writer_of(self, port: int) -> cst.SimpleStatementLine:
        """The last statement that assigns the variable behind flat output ``port``."""
        names = [name for name in self.variant.sub.outputs
                 for _ in range(self.variant.output_lengths.get(name, 1))]
        for statement in reversed(self.variant.sub.statements):
            if names[port] in bound_names(statement):
                return statement
        return self.variant.sub.statements[-1]

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        results = self.function(self.model, *inputs)
        flat: list[torch.Tensor] = []
        for name, value in zip(self.variant.sub.outputs, results):
            if isinstance(value, torch.Tensor):
                flat.append(value)
            elif isinstance(value, list | tuple):
                flat.extend(value)
            else:
                flat.append(torch.tensor(value))
        return tuple(flat)


def _function_source(variant: Variant, self_name: str, statements: list[cst.SimpleStatementLine] | None = None
                     ) -> tuple[str, list[int]]:
    """The sub-DNN as ``def _subdnn(self, *flat_inputs)``, and the first line of each statement in it."""
    sub = variant.sub
    params = [self_name]
    prologue = []
    for name in sub.inputs:
        length = variant.list_lengths.get(name)
        if length is None:
            params.append(name)
        else:
            parts = [f"{name}_{i}" for i in range(length)]
            params += parts
            prologue.append(f"    {name} = [{', '.join(parts)}]")
    lines = [f"def _subdnn({', '.join(params)}):", *prologue]
    first_lines = []
    for statement in statements if statements is not None else sub.statements:
        first_lines.append(len(lines) + 1)
        lines += ["    " + line for line in cst.Module([statement]).code.splitlines()]
    returned = ", ".join(sub.outputs) + ("," if len(sub.outputs) == 1 else "")
    lines.append(f"    return ({returned})")
    return "\n".join(lines) + "\n", first_lines
