"""Emit the standalone host module (paper §5.6).

The host mirrors the HCFG: a sub-DNN becomes one call of its compiled
executable, host operations and conditions are copied as written (with the
user's file:line as a trailing comment), and returns stay returns. The module
imports only the standard library, numpy and the backend's runtime.

``HostCodegen.program()`` returns a ``HostProgram`` (``hostgen.program``): the source
and, recorded as each statement is emitted, what every line of the emitted method is;
nothing downstream reads the source back. Only the emitted ``class Model(HostModel)`` with
its one method is generated; the rest is real modules laid out by ``hostgen.template``.
Override points: ``method`` and ``bases`` (the emitted method and the classes that call
it), ``mode_parts`` (a mode's runtime), ``call_expression`` (how one sub-DNN is run) and
the statement hooks ``block``, ``host_op``, ``sub_dnn_call``, ``condition``, ``return_``.
"""

from __future__ import annotations

import builtins
import json
import textwrap
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, ClassVar

import libcst as cst
import torch
from dycl.hcfg.graph import HCFG, Block, Cond, HostOp, Return, SubDNN, always_returns, walk
from dycl.hcfg.ports import Variant, describe
from dycl.hostgen.decisions import Decisions
from dycl.hostgen.host_globals import check_host_names, host_prelude
from dycl.hostgen.manifest import CallForm
from dycl.hostgen.names import CONSTANTS, FORWARD, MODEL_CONSTANTS
from dycl.hostgen.program import HostLine, HostProgram
from dycl.hostgen.template import host_layout, runtime_copy
from dycl.rewriter.locations import LocationTable, comment_of

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
    #: their rank (``_rank``: -1 for a Python number) follows the list lengths in a variant's key
    ranked_inputs: tuple[str, ...] = ()
    #: an output may be sized by the values passed, not only their shapes (``Variant.sizes_from_values``)
    sizes_from_values: bool = False

    @property
    def key(self) -> str:
        """The host expression of the variant key: list lengths, then ranks."""
        parts = [f"len({name})" for name in self.list_inputs] + [f"_rank({name})" for name in self.ranked_inputs]
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
        specs[sub.index] = CallSpec({v.key: v.name for v in own}, lists, scalars, trees, outputs, first.ranked,
                                    any(v.sizes_from_values for v in own))
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
    #: where the graph is the whole model in one sub-DNN: the conditions it reports (``hostgen.decisions``)
    decisions: Decisions | None = None
    indent: str = "    "

    #: the method of ``Model`` that runs the model's control flow, and the classes that call it
    method: ClassVar[str] = FORWARD
    bases: ClassVar[str] = "HostModel"

    def emit(self) -> str:
        """The host source (``program().source``)."""
        return self.program().source

    def program(self) -> HostProgram:
        """The host program; with ``globals``, the globals its host operations read are
        defined in it or refused (``hostgen.host_globals``), and the result is checked."""
        program = self._program([])
        if self.globals is None:
            return program
        prelude = host_prelude(program, self.globals, self.locations)
        if prelude:
            program = self._program(prelude)
        check_host_names(program, self.locations)
        return program

    def _program(self, prelude: list[str]) -> HostProgram:
        body = self.block(self.graph.body, 2)
        if self.uses_constants:
            body.insert(0, f"{self.indent * 2}{CONSTANTS} = self.{MODEL_CONSTANTS}")
        if not body or not always_returns(self.graph.body):
            body.append(self.indent * 2 + "return None")
        lines, statements = _physical_lines(body)
        params = ", ".join(self.graph.parameters)
        header = f"    def {self.method}(self, {params}):" if params else f"    def {self.method}(self):"
        opening = [f"class Model({self.bases}):",
                   f'    """The compiled model: ``{self.bases}`` with the model\'s control flow."""', ""]
        model = "\n".join([*opening, header, *lines])
        table = {offset: line.to_json() for offset, line in statements.items()}
        parts, model_line = host_layout(self.runtime_parts(prelude), self.tables(table), self.mode_parts(), model)
        first = model_line + len(opening)  # the def line
        line_map = MappingProxyType({first + offset: line for offset, line in statements.items()})
        return HostProgram("".join(parts), line_map, self.method, first, first + len(lines), parts, self.decisions)

    def runtime_parts(self, prelude: list[str]) -> list[str]:
        """The backend's runtime, then the port structures and the globals the host operations read
        (parts of their own: the copied modules stay the same text from host to host)."""
        parts = [textwrap.dedent(self.runtime).strip()]
        trees = self.port_tree_table()
        if trees:
            parts.append(runtime_copy("port_trees.py"))
            parts.append("# sub-DNN index -> (structure of inputs by name, structure of outputs)\n"
                         f"PORT_TREES = {trees}")
        if prelude:
            parts.append("# globals the model's host operations read\n" + "\n\n".join(prelude))
        return parts

    def tables(self, forward_lines: dict[int, list[Any]]) -> str:
        """The tables ``hostgen/host_runtime.py`` reads (``forward_lines``: ``FORWARD_LINES``)."""
        call = (self.call or CallForm.plain(self.graph.parameters, self.specialized)).to_host()
        return "\n".join([
            "# sub-DNN index -> {list lengths of its list inputs: compiled variant}",
            f"SUB_DNNS = {self.sub_dnn_table()}",
            "# sub-DNN index -> the model's lines it computes (named in run-time errors)",
            f"SOURCE_LINES = {self.source_lines()!r}",
            f"PARAMETERS = {json.dumps(list(self.graph.parameters))}",
            f"SPECIALIZED = {self.specialized!r}",
            "# forward()'s parameters and the form of the call the model was compiled for (see _bind)",
            f"CALL = {call!r}",
            f"# module state forward() writes, kept between calls: [parameter of {FORWARD}, attribute path in the",
            "# model, kind, value]; its value when the model was compiled is stored with the constants as",
            '# "<parameter>@state" (a list, which forward() appends to and gets no parameter: its tensors as',
            '# "<parameter>@state.<i>", its numbers here as ``value``), or, for a dict of numbers, written here',
            "# as ``value``; a list's length and its items (kinds length, prior: ``value`` names the list) are",
            "# passed to each call",
            f"STATE = {[list(entry) for entry in self.state]!r}",
            f"# line of Model.{self.method} (from its def line) -> [kind, sub-DNN, the model's file:line, test or",
            "# returned value, further lines of the statement] (hostgen/program.py)",
            f"FORWARD_LINES = {forward_lines!r}",
            *([] if self.decisions is None else [
                "# the model's conditions, run inside the one graph: the local holding their outcomes after the",
                "# call, each one's file:line and test, the model's calls, ifs and returns (hostgen/decisions.py)",
                f"FORWARD_DECISIONS = {self.decisions.to_json()!r}"]),
        ])

    def mode_parts(self) -> list[str]:
        """The runtime parts a mode adds between ``hostgen/host_runtime.py`` and ``Model``."""
        return []

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
        """The lines of ``block``; the first line of each statement is marked with its
        ``HostLine`` (``_Statement``), which ``program()`` collects into the line map."""
        lines: list[str] = []
        for node in block:
            if isinstance(node, SubDNN):
                lines += _marked(self.sub_dnn_call(node, depth), HostLine("call", _where(node.statements[0]),
                                                                          node.index))
            elif isinstance(node, HostOp):
                lines += _marked(self.host_op(node, depth), HostLine("host", _where(node.statement)))
            elif isinstance(node, Cond):
                test = HostLine("condition", _where(node.statement), text=_expr(node.test))
                lines += _marked([self.indent * depth + self.condition(node)], test)
                lines += self.block(node.then, depth + 1) or [self.indent * (depth + 1) + "pass"]
                if node.orelse:
                    lines.append(self.indent * depth + "else:")
                    lines += self.block(node.orelse, depth + 1)
            elif isinstance(node, Return):
                returned = HostLine("return", _where(node.statement), text=_expr(node.value))
                lines += _marked([self.indent * depth + self.return_(node)], returned)
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

    def call_expression(self, node: SubDNN) -> str:
        """The expression that runs sub-DNN ``node`` and gives its outputs (a tuple)."""
        spec = self.calls[node.index]
        if len(spec.variants) == 1:
            callee = f"self._call[{node.index}]"
        else:
            callee = f"self._variant({node.index}, ({spec.key}))"
        return f"{callee}({self.call_arguments(node)})"

    def sub_dnn_call(self, node: SubDNN, depth: int) -> list[str]:
        spec = self.calls[node.index]
        pad = self.indent * depth
        call = self.call_expression(node)
        where = _location(node.statements[0])
        if node.outputs:
            targets = ", ".join(node.outputs) + ("," if len(node.outputs) == 1 else "")
            if spec.output_trees:
                call = f"build_values({call}, PORT_TREES[{node.index}][1])"
            lines = [f"{pad}{targets} = {call}{where}"]
        else:
            lines = [f"{pad}{call}{where}"]
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


def _where(stmt: cst.CSTNode) -> str:
    """The user's ``file:line`` (and unrolled context) of ``stmt``, "" when unknown."""
    comment = comment_of(stmt)
    return comment.value.removeprefix("#").strip() if comment is not None else ""


class _Statement(str):
    """The first emitted line (or lines) of a statement, carrying what it is (``HostLine``)."""

    host_line: HostLine


def _marked(lines: list[str], line: HostLine) -> list[str]:
    """``lines`` with the first marked as the start of the statement ``line`` describes."""
    if not lines:
        return lines
    first = _Statement(lines[0])
    first.host_line = line
    return [first, *lines[1:]]


def _physical_lines(body: list[str]) -> tuple[list[str], dict[int, HostLine]]:
    """The physical lines of a method body, and each marked statement's ``HostLine`` by the
    offset of its first line from the ``def`` line (the body starts at offset 1)."""
    lines: list[str] = []
    statements: dict[int, HostLine] = {}
    for item in body:
        parts = item.split("\n")
        mark = getattr(item, "host_line", None)
        if mark is not None:
            statements[len(lines) + 1] = replace(mark, extra_lines=len(parts) - 1)
        lines += parts
    return lines, statements
