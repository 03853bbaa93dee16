"""Emit the standalone host module (paper §5.6).

The host mirrors the HCFG: a sub-DNN becomes one call of its compiled
executable, host operations and conditions are copied as written (with the
user's file:line as a trailing comment), and returns stay returns. The module
imports only the standard library, numpy and the backend's runtime.
"""

from __future__ import annotations

import builtins
import json
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import libcst as cst
import torch
from dycl.hcfg.graph import HCFG, Block, Cond, HostOp, Return, SubDNN, always_returns, walk
from dycl.hcfg.ports import Variant, describe
from dycl.hostgen.host_globals import check_host_names, host_prelude
from dycl.hostgen.manifest import CallForm
from dycl.hostgen.names import CONSTANTS, FORWARD, MODEL_CONSTANTS
from dycl.hostgen.template import HOST_TEMPLATE
from dycl.rewriter.locations import LocationTable, comment_of

_PORT_TREES = Path(__file__).with_name("port_trees.py").read_text().split('"""', 2)[2].strip()

# torch's run-time checks -> (index of the condition argument, the exception the host raises);
# the host cannot call torch, so it checks the same condition itself
_TORCH_CHECKS = {
    torch._check: (0, "RuntimeError"),
    torch._check_index: (0, "IndexError"),
    torch._check_value: (0, "ValueError"),
    torch._check_type: (0, "TypeError"),
    torch._check_not_implemented: (0, "NotImplementedError"),
    torch._check_tensor_all: (0, "RuntimeError"),
    torch._check_is_size: (0, "RuntimeError"),
    torch._assert: (0, "AssertionError"),
    torch._check_with: (1, None),
}


@dataclass(frozen=True)
class CallSpec:
    """How the host calls one sub-DNN: its variants (by list lengths and ranks), which of
    its inputs are lists of tensors (passed as ``*name``), which outputs are Python
    scalars, and the structure descriptions (``hostgen.port_trees``) of its
    structured inputs (by name) and of all its outputs when any is structured."""

    variants: dict[tuple[int, ...], str]
    list_inputs: tuple[str, ...] = ()
    scalar_outputs: tuple[str, ...] = ()
    input_trees: dict[str, Any] = field(default_factory=dict)
    output_trees: tuple[Any, ...] = ()
    #: their ``np.ndim`` (0 for a Python number) follows the list lengths in a variant's key
    ranked_inputs: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """The host expression of the variant key: list lengths, then ranks."""
        parts = [f"len({name})" for name in self.list_inputs] + [f"np.ndim({name})" for name in self.ranked_inputs]
        return ", ".join(parts) + ("," if len(parts) == 1 else "")


def call_specs(graph: HCFG, variants: list[Variant]) -> dict[int, CallSpec]:
    """The call of every sub-DNN of ``graph`` from its variants (``hcfg.variants``
    proved that they share one structure apart from the lengths of list inputs)."""
    by_sub: dict[int, list[Variant]] = {}
    for variant in variants:
        by_sub.setdefault(variant.sub.index, []).append(variant)
    specs = {}
    for sub in graph.sub_dnns:
        own = by_sub[sub.index]
        first = own[0]
        inputs = list(zip(sub.inputs, first.input_layouts))
        lists = tuple(name for name, layout in inputs if layout.is_tensor_list)
        trees = {name: describe(layout) for name, layout in inputs if not layout.is_port and name not in lists}
        structured = any(not layout.is_port for layout in first.output_layouts)
        outputs = tuple(describe(layout) for layout in first.output_layouts) if structured else ()
        scalars = () if structured else tuple(p.name.removesuffix(":out") for p in first.outputs if p.kind != "tensor")
        specs[sub.index] = CallSpec({v.key: v.name for v in own}, lists, scalars, trees, outputs, first.ranked)
    return specs


@dataclass
class HostCodegen:
    """Produces the host source for ``graph``; override a hook to change one construct."""

    graph: HCFG
    calls: dict[int, CallSpec]
    runtime: str
    specialized: dict[str, object] = field(default_factory=dict)
    call: CallForm | None = None
    uses_constants: bool = False
    #: module state threaded through forward (``rewriter.state_threading``): [parameter, path, kind, literal]
    state: tuple[tuple[str, str, str, Any], ...] = ()
    globals: dict[str, Any] | None = None
    locations: LocationTable | None = None
    indent: str = "    "

    def emit(self) -> str:
        """The host source; with ``globals``, the globals its host operations read are
        defined in it or refused (``hostgen.host_globals``), and the result is checked."""
        source = self._emit([])
        if self.globals is None:
            return source
        prelude = host_prelude(source, self.globals, self.locations)
        if prelude:
            source = self._emit(prelude)
        check_host_names(source, self.locations)
        return source

    def _emit(self, prelude: list[str]) -> str:
        body = self.block(self.graph.body, 2)
        if self.uses_constants:
            body.insert(0, f"{self.indent * 2}{CONSTANTS} = self.{MODEL_CONSTANTS}")
        if not body or not always_returns(self.graph.body):
            body.append(self.indent * 2 + "return None")
        params = ", ".join(self.graph.parameters)
        forward = "\n".join([f"    def {FORWARD}(self, {params}):" if params else f"    def {FORWARD}(self):", *body])
        runtime = textwrap.dedent(self.runtime).strip()
        trees = self.port_tree_table()
        if trees:
            runtime += "\n\n# structured values between sub-DNNs (dycl's hostgen/port_trees.py, copied)\n" + _PORT_TREES
            runtime += ("\n\n# sub-DNN index -> (structure of inputs by name, structure of outputs)\n"
                        f"PORT_TREES = {trees}")
        if prelude:
            runtime += "\n\n# globals the model's host operations read\n" + "\n\n".join(prelude)
        return HOST_TEMPLATE.format(
            runtime=runtime,
            sub_dnns=self.sub_dnn_table(),
            source_lines=repr(self.source_lines()),
            parameters=json.dumps(list(self.graph.parameters)),
            specialized=repr(self.specialized),
            call=repr((self.call or CallForm.plain(self.graph.parameters, self.specialized)).to_host()),
            state=repr([list(entry) for entry in self.state]),
            forward=forward,
        )

    def sub_dnn_table(self) -> str:
        lines = []
        for index in sorted(self.calls):
            spec = self.calls[index]
            lines.append(f"    {index}: {spec.variants!r},")
        return "{\n" + "\n".join(lines) + "\n}" if lines else "{}"

    def port_tree_table(self) -> str:
        lines = [f"    {index}: ({spec.input_trees!r}, {spec.output_trees!r}),"
                 for index, spec in sorted(self.calls.items()) if spec.input_trees or spec.output_trees]
        return "{\n" + "\n".join(lines) + "\n}" if lines else ""

    def source_lines(self) -> dict[int, list[str]]:
        """For each sub-DNN, the distinct model lines (``file:line``) of its statements."""
        table: dict[int, list[str]] = {}
        for node in walk(self.graph.body):
            if isinstance(node, SubDNN):
                lines = [_location(statement).strip().removeprefix("# ") for statement in node.statements]
                table[node.index] = list(dict.fromkeys(line for line in lines if line))
        return table

    # -- hooks ------------------------------------------------------------------------------------

    def block(self, block: Block, depth: int) -> list[str]:
        lines: list[str] = []
        for node in block:
            if isinstance(node, SubDNN):
                lines += self.sub_dnn_call(node, depth)
            elif isinstance(node, HostOp):
                lines += self.host_op(node, depth)
            elif isinstance(node, Cond):
                lines.append(self.indent * depth + self.condition(node))
                lines += self.block(node.then, depth + 1) or [self.indent * (depth + 1) + "pass"]
                if node.orelse:
                    lines.append(self.indent * depth + "else:")
                    lines += self.block(node.orelse, depth + 1)
            elif isinstance(node, Return):
                lines.append(self.indent * depth + self.return_(node))
        return lines

    def host_op(self, node: HostOp, depth: int) -> list[str]:
        check = self._torch_check(node.statement)
        if check is None:
            return [self.indent * depth + _code(node.statement).strip()]
        condition, error = check
        message = f"{_code(node.statement).strip().split('#')[0].strip()} failed"
        return [f"{self.indent * depth}if not ({condition}):{_location(node.statement)}",
                f"{self.indent * (depth + 1)}raise {error}({message!r})"]

    def _torch_check(self, stmt: cst.CSTNode) -> tuple[str, str] | None:
        """(condition, exception) when ``stmt`` is a call of one of torch's run-time checks."""
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        if not (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)) or self.globals is None:
            return None
        call = small.value
        function = _resolve(call.func, self.globals)
        entry = next((e for f, e in _TORCH_CHECKS.items() if f is function), None)
        if entry is None:
            return None
        index, error = entry
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        condition = positional[index] if len(positional) > index else keywords.get("cond")
        if condition is None:
            return None
        text = _expr(condition)
        if function is torch._check_is_size:
            text = f"({text}) >= 0"
        if function is torch._check_with:
            kind = _resolve(positional[0], self.globals) if positional else None
            builtin = isinstance(kind, type) and getattr(builtins, kind.__name__, None) is kind
            error = kind.__name__ if builtin and issubclass(kind, Exception) else "RuntimeError"
        if function is torch._check_tensor_all:
            text = f"({text}).all()"
        return text, error

    def call_arguments(self, node: SubDNN) -> str:
        """The arguments a sub-DNN is called with: a list input as its items, a host
        structure (dict, user object) as its port leaves, anything else as it is."""
        spec = self.calls[node.index]
        return ", ".join(f"*{name}" if name in spec.list_inputs else
                         f"*port_leaves({name}, PORT_TREES[{node.index}][0][{name!r}])"
                         if name in spec.input_trees else name for name in node.inputs)

    def sub_dnn_call(self, node: SubDNN, depth: int) -> list[str]:
        spec = self.calls[node.index]
        pad = self.indent * depth
        arguments = self.call_arguments(node)
        if len(spec.variants) == 1:
            callee = f"self._call[{node.index}]"
        else:
            callee = f"self._variant({node.index}, ({spec.key}))"
        where = _location(node.statements[0])
        if node.outputs:
            targets = ", ".join(node.outputs) + ("," if len(node.outputs) == 1 else "")
            call = f"{callee}({arguments})"
            if spec.output_trees:
                call = f"build_values({call}, PORT_TREES[{node.index}][1])"
            lines = [f"{pad}{targets} = {call}{where}"]
        else:
            lines = [f"{pad}{callee}({arguments}){where}"]
        lines += [f"{pad}{name} = {name}.item()" for name in spec.scalar_outputs]
        return lines

    def condition(self, node: Cond) -> str:
        return f"if {_expr(node.test)}:{_location(node.statement)}"

    def return_(self, node: Return) -> str:
        return f"return {_expr(node.value)}{_location(node.statement)}"


def _resolve(node: cst.BaseExpression, globals_: dict[str, Any]) -> Any:
    """The object a dotted global name (``torch._check``) denotes, else None."""
    if isinstance(node, cst.Name):
        return globals_.get(node.value)
    if isinstance(node, cst.Attribute):
        return getattr(_resolve(node.value, globals_), node.attr.value, None)
    return None


def _code(stmt: cst.CSTNode) -> str:
    return cst.Module([stmt]).code.rstrip("\n")


def _expr(node: cst.BaseExpression) -> str:
    return cst.Module([]).code_for_node(node)


def _location(stmt: cst.CSTNode) -> str:
    comment = comment_of(stmt)
    return f"  {comment.value}" if comment is not None else ""
