"""Each sub-DNN variant as an ``nn.Module`` over flat tensor inputs and outputs,
for a backend to export.

The port/variant IR is ``hcfg.ports`` (what crosses the boundary) and
``hcfg.variants`` (the compilable forms); this module only wraps a variant's
statements in a torch module. Its ``forward`` takes the variant's flat input
ports, rebuilds each variable from them (``hcfg.pytree_ports.rebuild``: lists,
dicts, records, statics compiled in), runs the statements over the original
model's parameters (no copies), and returns the flat output ports.
"""

from __future__ import annotations

from typing import Any

import libcst as cst
import torch

from dycl.export.number_types import typed_number_questions
from dycl.export.opaque_lengths import traced_module_lengths
from dycl.export.read_weights import read_roots, weights_tree
from dycl.export.size_numbers import exact_size_statements
from dycl.hcfg.ports import Variant
from dycl.hcfg.pytree_ports import port_values, rebuild
from dycl.rewriter.errors import SourceLocation
from dycl.rewriter.locations import LocationTable
from dycl.rewriter.walk import bound_names


class SubDNNModule(torch.nn.Module):
    """``forward(*flat_inputs) -> tuple(flat_outputs)`` running the sub-DNN's
    statements over the original model's parameters (no copies).

    ``source_model`` is the model the statements run on (not registered); the registered
    ``model`` holds only the parts of it the statements read (``dycl.export.read_weights``),
    under the same paths, so an exporter walks those and not the whole model's state."""

    def __init__(self, model: torch.nn.Module, variant: Variant, globals_: dict[str, Any],
                 self_name: str, locations: LocationTable | None = None) -> None:
        super().__init__()
        object.__setattr__(self, "source_model", model)  # not a submodule: see the class docstring
        self.variant = variant
        self._locations = locations or LocationTable()
        namespace: dict[str, Any] = dict(globals_)
        local = {n for s in variant.sub.statements for n in bound_names(s)} | set(variant.sub.inputs) | {self_name}
        numbers = {p.name for p in variant.inputs if p.kind != "tensor"}
        statements = exact_size_statements(variant.sub.statements, namespace, local, numbers,
                                           self._locations.resolve)  # sizes as Python numbers, exact in the trace
        statements = typed_number_questions(statements, variant, namespace, local)  # isinstance(n, int) of a port
        roots = read_roots(statements, self_name, model)
        self.model = model if roots is None else weights_tree(model, roots)
        statements = traced_module_lengths(statements, namespace, local, (self_name, model))  # len() in submodules
        source, self._line_of_statement = _function_source(variant, self_name, statements)
        self.filename = f"<dycl-{variant.name}>"
        namespace.update(_dycl_rebuild=rebuild, _dycl_layouts=variant.input_layouts)
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
        name = self.variant.output_variable(port)
        for statement in reversed(self.variant.sub.statements):
            if name in bound_names(statement):
                return statement
        return self.variant.sub.statements[-1]

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        results = self.function(self.source_model, *inputs)
        flat: list[torch.Tensor] = []
        for value, layout in zip(results, self.variant.output_layouts):
            flat += port_values(value, layout)
        return tuple(flat)


def _function_source(variant: Variant, self_name: str, statements: list[cst.SimpleStatementLine] | None = None
                     ) -> tuple[str, list[int]]:
    """The sub-DNN as ``def _subdnn(self, *flat_inputs)``, and the first line of each statement in it."""
    sub = variant.sub
    params = [self_name]
    prologue = []
    for position, (name, layout) in enumerate(zip(sub.inputs, variant.input_layouts)):
        if layout.is_port:
            params.append(name)
            continue
        parts = [f"{name}_{i}" for i in range(layout.port_count)]
        params += parts
        ports = f"({', '.join(parts)}{',' if len(parts) == 1 else ''})"
        prologue.append(f"    {name} = _dycl_rebuild(iter({ports}), _dycl_layouts[{position}])")
    lines = [f"def _subdnn({', '.join(params)}):", *prologue]
    first_lines = []
    for statement in statements if statements is not None else sub.statements:
        first_lines.append(len(lines) + 1)
        lines += ["    " + line for line in cst.Module([statement]).code.splitlines()]
    returned = ", ".join(sub.outputs) + ("," if len(sub.outputs) == 1 else "")
    lines.append(f"    return ({returned})")
    return "\n".join(lines) + "\n", first_lines
