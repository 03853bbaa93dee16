"""Emit the standalone host module (paper §5.6).

The host mirrors the HCFG: a sub-DNN becomes one call of its compiled
executable, host operations and conditions are copied as written (with the
user's file:line as a trailing comment), and returns stay returns. The module
imports only the standard library, numpy and the backend's runtime.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass, field

import libcst as cst

from hcfg.graph import HCFG, Block, Cond, HostOp, Return, SubDNN, always_returns
from hostgen.template import HOST_TEMPLATE
from rewriter.locations import comment_of


@dataclass(frozen=True)
class CallSpec:
    """How the host calls one sub-DNN: its variants (by list lengths), which of
    its inputs are lists, and which outputs are Python scalars."""

    variants: dict[tuple[int, ...], str]
    list_inputs: tuple[str, ...] = ()
    scalar_outputs: tuple[str, ...] = ()


@dataclass
class HostCodegen:
    """Produces the host source for ``graph``; override a hook to change one construct."""

    graph: HCFG
    calls: dict[int, CallSpec]
    runtime: str
    manifest_inputs: list[dict] = field(default_factory=list)
    specialized: dict[str, object] = field(default_factory=dict)
    uses_constants: bool = False
    indent: str = "    "

    def emit(self) -> str:
        body = self.block(self.graph.body, 2)
        if self.uses_constants:
            body.insert(0, self.indent * 2 + "_constants = self.constants")
        if not body or not _returns(self.graph.body):
            body.append(self.indent * 2 + "return None")
        params = ", ".join(self.graph.parameters)
        forward = "\n".join([f"    def _forward(self, {params}):" if params else "    def _forward(self):", *body])
        return HOST_TEMPLATE.format(
            runtime=textwrap.dedent(self.runtime).strip(),
            sub_dnns=self.sub_dnn_table(),
            parameters=json.dumps(list(self.graph.parameters)),
            specialized=repr(self.specialized),
            forward=forward,
        )

    def sub_dnn_table(self) -> str:
        lines = []
        for index in sorted(self.calls):
            spec = self.calls[index]
            lines.append(f"    {index}: {spec.variants!r},")
        return "{\n" + "\n".join(lines) + "\n}" if lines else "{}"

    # -- hooks ------------------------------------------------------------------------------------

    def block(self, block: Block, depth: int) -> list[str]:
        lines: list[str] = []
        for node in block:
            if isinstance(node, SubDNN):
                lines += self.sub_dnn_call(node, depth)
            elif isinstance(node, HostOp):
                lines.append(self.indent * depth + _code(node.statement).strip())
            elif isinstance(node, Cond):
                lines.append(self.indent * depth + self.condition(node))
                lines += self.block(node.then, depth + 1) or [self.indent * (depth + 1) + "pass"]
                if node.orelse:
                    lines.append(self.indent * depth + "else:")
                    lines += self.block(node.orelse, depth + 1)
            elif isinstance(node, Return):
                lines.append(self.indent * depth + self.return_(node))
        return lines

    def sub_dnn_call(self, node: SubDNN, depth: int) -> list[str]:
        spec = self.calls[node.index]
        pad = self.indent * depth
        arguments = ", ".join(f"*{name}" if name in spec.list_inputs else name for name in node.inputs)
        if len(spec.variants) == 1:
            callee = f"self._call[{node.index}]"
        else:
            key = ", ".join(f"len({name})" for name in spec.list_inputs) + ("," if len(spec.list_inputs) == 1 else "")
            callee = f"self._variant({node.index}, ({key}))"
        where = _location(node.statements[0])
        if node.outputs:
            targets = ", ".join(node.outputs) + ("," if len(node.outputs) == 1 else "")
            lines = [f"{pad}{targets} = {callee}({arguments}){where}"]
        else:
            lines = [f"{pad}{callee}({arguments}){where}"]
        lines += [f"{pad}{name} = {name}.item()" for name in spec.scalar_outputs]
        return lines

    def condition(self, node: Cond) -> str:
        return f"if {_expr(node.test)}:{_location(node.statement)}"

    def return_(self, node: Return) -> str:
        return f"return {_expr(node.value)}{_location(node.statement)}"


def _code(stmt: cst.CSTNode) -> str:
    return cst.Module([stmt]).code.rstrip("\n")


def _expr(node: cst.BaseExpression) -> str:
    return cst.Module([]).code_for_node(node)


def _location(stmt: cst.CSTNode) -> str:
    comment = comment_of(stmt)
    return f"  {comment.value}" if comment is not None else ""


def _returns(block: Block) -> bool:
    return always_returns(block)
