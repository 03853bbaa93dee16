"""Merge two sub-DNNs that only a rename on the host keeps apart.

The builder puts reference moves on the host (paper §5.4: ``residual = h`` computes
nothing), so the residual pattern ``h = self.enc(x); residual = h; h = self.block(h) +
residual`` becomes *sub-DNN, host rename, sub-DNN*: two runtime calls where one graph would
do, and ``hcfg.optimize.merge_into_producers`` cannot help, since the second sub-DNN writes
``h``, which the rename reads.

``merge_across_renames`` folds such a run back into one sub-DNN: in a block, a sub-DNN ``P``,
then host renames ``a = b`` (a local to a local) each of whose value ``b`` ``P`` (or a rename
before it) assigned, then a sub-DNN ``N`` right after them, become one sub-DNN whose
statements are ``P``'s, the renames, then ``N``'s. Where a rename's two names still denote
one object after ``N`` (``N`` and the renames after it rebind neither), the rename is also
kept on the host after the merged sub-DNN, so that names the host sees as one object stay one
object (a runtime returns each output as its own array).

Assumes: a value a sub-DNN assigns is a tensor or a structure of tensors (what a sub-DNN
computes); the graph is annotated. Guarantees: each path runs the same statements in the
same order on the same values, so the result is the eager one; only renames of values a
sub-DNN assigned move into a graph. ``N`` is left alone where any of its statements may write
a value in place (an augmented assignment, an assignment to an attribute or item, a call of
a function or method ending in ``_``, an ``inplace=`` or ``out=`` argument), since inside
one graph the rename's two names would then share the write, which on the host they did not.
(An in-place module, ``nn.ReLU(inplace=True)``, is not seen here; inside one graph its write
reaches both names as in eager.) Renames followed by anything else stay.
"""

from __future__ import annotations

from dataclasses import replace

import libcst as cst
from dycl.hcfg.annotate import annotate
from dycl.hcfg.graph import HCFG, Block, Cond, HostOp, Node, SubDNN
from dycl.hcfg.passes import graph_pass
from dycl.rewriter.walk import bound_names, descendants


def rename_of(node: Node) -> tuple[str, str] | None:
    """``(a, b)`` for a host ``a = b`` of two plain names, else None."""
    if not isinstance(node, HostOp) or len(node.statement.body) != 1:
        return None
    assign = node.statement.body[0]
    if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1
            and isinstance(assign.targets[0].target, cst.Name) and isinstance(assign.value, cst.Name)):
        return None
    return assign.targets[0].target.value, assign.value.value


def may_write_in_place(sub: SubDNN) -> bool:
    for statement in sub.statements:
        for node in descendants(statement):
            if isinstance(node, cst.AugAssign):
                return True
            if isinstance(node, cst.AssignTarget) and not isinstance(node.target, (cst.Name, cst.Tuple, cst.List)):
                return True
            if isinstance(node, cst.Call) and (_in_place_name(node.func) or any(
                    arg.keyword is not None and arg.keyword.value in {"inplace", "out"} for arg in node.args)):
                return True
    return False


def _in_place_name(function: cst.BaseExpression) -> bool:
    """``h.add_``, ``torch.relu_``: torch's names of in-place operations end in one underscore."""
    name = function.attr.value if isinstance(function, cst.Attribute) else (
        function.value if isinstance(function, cst.Name) else "")
    return name.endswith("_") and not name.endswith("__")


def _assigned(statements: tuple[cst.SimpleStatementLine, ...]) -> set[str]:
    names: set[str] = set()
    for statement in statements:
        names |= bound_names(statement)
    return names


def _host_renames_kept(statements: tuple[cst.SimpleStatementLine, ...], renames: list[int]) -> list[HostOp]:
    """The renames (positions in ``statements``) whose two names no later statement rebinds."""
    return [HostOp(statements[at]) for at in renames
            if not set(rename_of(HostOp(statements[at]))) & _assigned(statements[at + 1:])]


def _renames_after(nodes: Block, start: int, producer: SubDNN, locals_: frozenset[str]) -> list[HostOp]:
    """The renames of values ``producer`` assigned that follow it from ``nodes[start]`` on."""
    assigned, found = _assigned(producer.statements), []
    for node in nodes[start:]:
        names = rename_of(node)
        if names is None or names[1] not in assigned or not set(names) <= locals_:
            break
        found.append(node)
        assigned.add(names[0])
    return found


@graph_pass
def merge_across_renames(graph: HCFG) -> HCFG:
    """Fold *sub-DNN, host renames, sub-DNN* into one sub-DNN wherever the module docstring allows."""

    def block(nodes: Block) -> Block:
        nodes = tuple(replace(n, then=block(n.then), orelse=block(n.orelse)) if isinstance(n, Cond) else n
                      for n in nodes)
        out: list[Node] = []
        position = 0
        while position < len(nodes):
            node = nodes[position]
            position += 1
            if not isinstance(node, SubDNN):
                out.append(node)
                continue
            statements, renames = node.statements, []  # renames: their positions in statements
            while True:
                found = _renames_after(nodes, position, replace(node, statements=statements), graph.locals)
                after = position + len(found)
                consumer = nodes[after] if after < len(nodes) else None
                if not found or not isinstance(consumer, SubDNN) or may_write_in_place(consumer):
                    break
                renames += range(len(statements), len(statements) + len(found))
                statements += tuple(r.statement for r in found) + consumer.statements
                position = after + 1
            out += [replace(node, statements=statements), *_host_renames_kept(statements, renames)]
        return tuple(out)

    return annotate(graph.with_body(block(graph.body)))


__all__ = ["may_write_in_place", "merge_across_renames", "rename_of"]
