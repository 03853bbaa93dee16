"""Pictures of an HCFG: Graphviz when a ``dot`` program is available, matplotlib otherwise.

``layout_json(graph)`` turns the graph into plain data (saved in artifacts as
``hcfg.json``, so ``python -m dycl show`` draws without importing any code):
boxes for sub-DNNs (name, user source lines, an op summary, the first
statement), conditions (the test and its line), runs of host operations (one
grey note per run) and returns; a join point wherever the branches of a
condition meet again; edges out of a condition labelled T and F. Every box
also gets a position from our own layout — the then-branch below its
condition, the else-branch beside it, the join below both — and the program is
cut between top-level nodes into columns placed side by side, so that a long
chain of conditions (BlockDrop has 54) gives a picture about as wide as tall.

``render(data, path)`` writes SVG or PNG: through ``dot`` (Graphviz, or the
``graphviz-pure`` wheel's port of it) when one is on the PATH or beside the
Python executable, one cluster per column; else by matplotlib's object-oriented
API from the stored positions (never ``matplotlib.use``/``pyplot``: a notebook's
inline backend stays as it was).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import shutil
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import libcst as cst
from dycl.hcfg.nodes import Block, Cond, HostOp, Return, SubDNN, source_of, where

if TYPE_CHECKING:
    from dycl.hcfg.graph import HCFG

WIDTH = 40  # characters per label line
LANE_INCHES, ROW_INCHES = 3.6, 0.75  # a lane holds one box; a row one rank
STYLE = {  # kind -> (fill, edge colour)
    "sub_dnn": ("#dbe8fb", "#3b6fb6"),
    "cond": ("#fde9c9", "#c98a1b"),
    "host": ("#f4f4f4", "#aaaaaa"),
    "return": ("#e6e6e6", "#555555"),
    "join": ("#555555", "#555555"),
}
EDGE_COLOUR = {"T": "#2e7d32", "F": "#c62828", "": "#888888", "wrap": "#aaaaaa"}


class _OpNames(cst.CSTVisitor):
    """The callee names of a statement: ``self.conv1(x)`` → conv1, ``F.relu(x)`` → relu."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        while isinstance(func, (cst.Subscript, cst.Call)):
            func = func.value if isinstance(func, cst.Subscript) else func.func
        if isinstance(func, cst.Attribute):
            self.names.append(func.attr.value)
        elif isinstance(func, cst.Name):
            self.names.append(func.value)


def _op_summary(statements: Sequence[cst.SimpleStatementLine]) -> str:
    visitor = _OpNames()
    for stmt in statements:
        stmt.visit(visitor)
    counts = Counter(name for name in visitor.names if name not in {"item", "float", "int", "bool"})
    parts = [f"{name}×{count}" if count > 1 else name for name, count in counts.most_common(4)]
    more = " …" if len(counts) > 4 else ""
    return f"{len(statements)} stmt{'s' * (len(statements) != 1)}: {' '.join(parts) or '—'}{more}"


def _wrap(text: str, lines: int = 2) -> list[str]:
    wrapped = textwrap.wrap(text, WIDTH, break_long_words=False, break_on_hyphens=False) or [""]
    if len(wrapped) > lines:
        wrapped = [*wrapped[: lines - 1], textwrap.shorten(" ".join(wrapped[lines - 1:]), WIDTH, placeholder=" …")]
    return wrapped


class _Builder:
    """Boxes and edges in program order, with positions (lane x, row y) in one column."""

    def __init__(self) -> None:
        self.nodes: list[dict[str, Any]] = []
        self.edges: list[list[Any]] = []

    def add(self, kind: str, title: str, lines: list[str], where: str, x: float, y: float,
            preds: list[tuple[int, str]]) -> int:
        ident = len(self.nodes)
        self.nodes.append({"id": ident, "kind": kind, "title": title, "lines": lines, "where": where, "x": x, "y": y})
        self.edges += [[p, ident, tag] for p, tag in preds]
        return ident

    def block(self, block: Block, x: float, y: float, preds: list[tuple[int, str]]
              ) -> tuple[list[tuple[int, str]], float, float]:
        """Place ``block`` from (x, y); returns its exits, its width in lanes and the next free row."""
        width = 1.0
        hosts: list[HostOp] = []
        nodes = list(block)
        for position, node in enumerate(nodes):
            if not preds:
                break
            if isinstance(node, HostOp):
                hosts.append(node)
                if position + 1 < len(nodes) and isinstance(nodes[position + 1], HostOp):
                    continue
                text = [source_of(h.statement.body[0]) for h in hosts]
                shown = [line for t in text[:3] for line in _wrap(t, 1)] + ([f"… {len(text) - 3} more"]
                                                                            if len(text) > 3 else [])
                ident = self.add("host", "", shown, where(hosts[0].statement), x, y, preds)
                hosts, preds, y = [], [(ident, "")], y + 0.6 + 0.25 * len(shown)
            elif isinstance(node, SubDNN):
                first, last = where(node.statements[0]), where(node.statements[-1])
                span = first if first == last or not last else f"{first}–{last.rsplit(':', 1)[-1]}"
                lines = [_op_summary(node.statements), *_wrap(source_of(node.statements[0].body[0]), 1)]
                ident = self.add("sub_dnn", node.name, lines, span, x, y, preds)
                preds, y = [(ident, "")], y + 1.4
            elif isinstance(node, Return):
                ident = self.add("return", "", _wrap(f"return {source_of(node.value)}"), where(node.statement),
                                 x, y, preds)
                preds, y = [], y + 1.0
            elif isinstance(node, Cond):
                ident = self.add("cond", "", _wrap(f"if {source_of(node.statement.test)}"),
                                 where(node.statement), x, y, preds)
                then_exits, then_width, then_y = self.block(node.then, x, y + 1.2, [(ident, "T")])
                else_x = x + (then_width if node.then else 0.5)
                else_exits, else_width, else_y = self.block(node.orelse, else_x, y + 1.2, [(ident, "F")])
                width = max(width, else_x - x + (else_width if node.orelse else 0.5))
                preds, y = then_exits + else_exits, max(then_y, else_y)
                if len(preds) > 1:
                    ident = self.add("join", "", [], "", x, y, preds)
                    preds, y = [(ident, "")], y + 0.5
        return preds, width, y


def layout_json(graph: HCFG) -> dict[str, Any]:
    """The picture as plain data: boxes with positions, edges, columns (see the module docstring)."""
    builder = _Builder()
    preds: list[tuple[int, str]] = []
    tops: list[tuple[int, float, float, float]] = []  # first node, start row, end row, width of each top node
    y = 0.0
    entry = builder.add("join", "", [], "", 0.0, y, [])
    preds, y = [(entry, "")], 0.5
    for node in graph.body:
        if not preds:
            break
        first = len(builder.nodes)
        preds, width, end = builder.block((node,), 0.0, y, preds)
        tops.append((first, y, end, width))
        y = end
    if preds:
        builder.add("return", "", ["return None"], "", 0.0, y, preds)
        y += 1.0
    _wrap_columns(builder, tops, y)
    nodes = builder.nodes
    return {"version": 2,
            "title": f"HCFG of {graph.name}: {len(graph.sub_dnns)} sub-DNNs, {len(graph.conditions)} conditions",
            "nodes": nodes, "edges": builder.edges,
            "columns": 1 + max((n.get("column", 0) for n in nodes), default=0)}


def _wrap_columns(builder: _Builder, tops: list[tuple[int, float, float, float]], height: float) -> None:
    """Cut the column between top-level nodes so that the picture is about as wide as tall."""
    lanes = max((t[3] for t in tops), default=1.0)
    columns = max(1, round(math.sqrt(height * ROW_INCHES / (lanes * LANE_INCHES))))
    target = height / columns
    starts = [t[0] for t in tops] + [len(builder.nodes)]
    column, x_offset, y_shift, column_width = 0, 0.0, 0.0, 1.0
    for index, (first, start, end, width) in enumerate(tops):
        if start - y_shift > 0.5 and end - y_shift > target * 1.05 and column + 1 < columns:
            column, x_offset, y_shift = column + 1, x_offset + column_width + 0.6, start - 0.5
            column_width = 1.0
            builder.edges = [[a, b, "wrap" if b == first and tag == "" else tag] for a, b, tag in builder.edges]
        column_width = max(column_width, width)
        for node in builder.nodes[first: starts[index + 1]]:
            node.update(x=node["x"] + x_offset, y=node["y"] - y_shift, column=column)
    for node in builder.nodes:  # the entry point; the final ``return None`` moved with the last top node
        node.setdefault("column", 0)


# -- Graphviz ----------------------------------------------------------------------------------------------------


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def to_dot(data: dict[str, Any]) -> str:
    """Graphviz source for a ``layout_json`` picture: one cluster per column, T/F edge labels."""
    lines = ["digraph hcfg {", "  newrank=true; nodesep=0.25; ranksep=0.3;",
             f'  label="{_escape(data["title"])}"; labelloc=t; fontname="Helvetica"; fontsize=14;',
             '  node [fontname="Courier", fontsize=10, margin="0.12,0.05"];',
             '  edge [fontname="Helvetica", fontsize=10, arrowsize=0.6];']
    by_column: dict[int, list[dict[str, Any]]] = {}
    for node in data["nodes"]:
        by_column.setdefault(node.get("column", 0), []).append(node)
    for column, nodes in sorted(by_column.items()):
        lines.append(f"  subgraph cluster_{column} {{ style=invis;")
        lines += [f"    {_dot_node(node)}" for node in nodes]
        lines.append("  }")
    for source, target, tag in data["edges"]:
        attributes = [f'color="{EDGE_COLOUR[tag]}"']
        if tag in ("T", "F"):
            attributes += [f'label=" {tag} "', f'fontcolor="{EDGE_COLOUR[tag]}"']
        if tag == "wrap":
            attributes += ["style=dashed", "constraint=false"]
        lines.append(f"  n{source} -> n{target} [{', '.join(attributes)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot_node(node: dict[str, Any]) -> str:
    fill, edge = STYLE[node["kind"]]
    ident = f"n{node['id']}"
    if node["kind"] == "join":
        return f'{ident} [shape=point, width=0.08, color="{edge}"];'
    head = " ".join(part for part in (node["title"], node["where"]) if part)
    text = "\\l".join(_escape(line) for line in ([head] if head and node["kind"] == "sub_dnn" else [])
                      + node["lines"]) + "\\l"
    if node["kind"] == "cond" and node["where"]:
        text += _escape(node["where"]) + "\\r"
    shape = {"sub_dnn": "box", "cond": "hexagon", "host": "note", "return": "oval"}[node["kind"]]
    style = "filled,rounded" if node["kind"] == "sub_dnn" else "filled"
    font = ', fontcolor="#555555", fontsize=9' if node["kind"] == "host" else ""
    return f'{ident} [shape={shape}, style="{style}", fillcolor="{fill}", color="{edge}"{font}, label="{text}"];'


def outline_dot(graph: HCFG) -> str:
    """Graphviz source of ``graph`` without our layout: conditions are diamonds, sub-DNNs
    boxes (labelled with their statements' first lines), host ops plain text, returns ovals."""
    lines = ["digraph hcfg {", '  node [fontname="monospace", fontsize=10];', '  entry [shape=point];']
    exits = _dot_block(graph.body, ["entry"], lines, itertools.count())
    if exits:
        lines.append('  end [shape=oval, label="return None"];')
        lines += [f"  {e} -> end;" for e in exits]
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot_block(block: Block, preds: list[str], lines: list[str], counter) -> list[str]:
    for node in block:
        if not preds:
            return []
        ident = f"n{next(counter)}"
        if isinstance(node, SubDNN):
            first = [source_of(s.body[0]) for s in node.statements[:3]]
            more = "\\l..." if len(node.statements) > 3 else ""
            label = f"{node.name}\\l" + "\\l".join(_escape(t) for t in first) + more + "\\l"
            lines.append(f'  {ident} [shape=box, style=filled, fillcolor="#dbe8fb", label="{label}"];')
        elif isinstance(node, HostOp):
            lines.append(f'  {ident} [shape=plaintext, label="{_escape(source_of(node.statement.body[0]))}"];')
        elif isinstance(node, Return):
            lines.append(f'  {ident} [shape=oval, label="return {_escape(source_of(node.value))}"];')
        else:
            lines.append(f'  {ident} [shape=diamond, style=filled, fillcolor="#fde9c9", '
                         f'label="if {_escape(source_of(node.statement.test))}"];')
        lines += [f"  {p} -> {ident};" for p in preds]
        if isinstance(node, Return):
            return []
        if isinstance(node, Cond):
            then_exits = _dot_block(node.then, [ident], lines, counter) if node.then else [ident]
            else_exits = _dot_block(node.orelse, [ident], lines, counter) if node.orelse else [ident]
            preds = then_exits + else_exits
        else:
            preds = [ident]
    return preds


def dot_program() -> str | None:
    """A Graphviz ``dot`` (or the ``graphviz-pure`` port) on the PATH or beside Python, else None."""
    if os.environ.get("DYCL_NO_GRAPHVIZ"):
        return None
    beside = str(Path(sys.executable).parent)
    for name in ("dot", "graphviz-pure"):
        found = shutil.which(name) or shutil.which(name, path=beside)
        if found:
            return found
    return None


# -- rendering ---------------------------------------------------------------------------------------------------


def render(data: dict[str, Any], path: str | Path, engine: str | None = None) -> str:
    """Write the picture to ``path`` (.svg or .png); returns what drew it ("graphviz" or
    "matplotlib"). ``engine`` forces one of them."""
    path = Path(path)
    program = dot_program() if engine in (None, "graphviz") else None
    if engine == "graphviz" and program is None:
        raise RuntimeError("no Graphviz dot program found (install graphviz, or `pip install graphviz-pure`)")
    if program is not None:
        fmt = path.suffix.lstrip(".").lower() or "svg"
        subprocess.run([program, f"-T{fmt}", "-o", str(path)], input=to_dot(data).encode(), check=True,
                       capture_output=True, timeout=120)
        return "graphviz"
    figure(data).savefig(path, dpi=100)
    return "matplotlib"


def draw(graph: HCFG, path: str | Path, engine: str | None = None) -> str:
    """Write the picture of ``graph`` to ``path`` (PNG or SVG); returns ``path`` as a string."""
    render(layout_json(graph), path, engine)
    return str(path)


def render_artifact(directory: str | Path, path: str | Path) -> str:
    """Draw a saved artifact's ``hcfg.json`` (data only; nothing is imported or run)."""
    data = json.loads((Path(directory) / "hcfg.json").read_text())
    if data.get("version") != 2:
        raise ValueError(f"{directory}/hcfg.json was written by an older dycl: recompile to draw it")
    return render(data, path)


def figure(data: dict[str, Any]):
    """A ``matplotlib.figure.Figure`` of the picture (shown inline by Jupyter when returned)."""
    from matplotlib.figure import Figure

    nodes = {node["id"]: node for node in data["nodes"]}
    width = max((n["x"] for n in nodes.values()), default=0) + 1
    height = max((n["y"] for n in nodes.values()), default=0) + 1
    fig = Figure(figsize=(max(4.0, width * LANE_INCHES * 0.8), max(2.0, height * ROW_INCHES * 0.8)))
    axes = fig.add_axes((0, 0, 1, 0.97))
    axes.set_xlim(-0.1, width + 0.1)
    axes.set_ylim(height + 0.1, -0.6)
    axes.axis("off")
    fig.suptitle(data["title"], fontsize=10)
    for node in nodes.values():
        fill, edge = STYLE[node["kind"]]
        if node["kind"] == "join":
            axes.plot([node["x"] + 0.45], [node["y"]], "o", color=edge, markersize=3)
            continue
        head = " ".join(part for part in (node["title"], node["where"]) if part)
        text = "\n".join(([head] if head else []) + node["lines"])
        box = axes.text(node["x"] + 0.04, node["y"], text, fontsize=6.5, family="monospace", va="top", ha="left",
                        color="#555555" if node["kind"] == "host" else "black")
        box.set_bbox({"boxstyle": "round,pad=0.3" if node["kind"] != "cond" else "round4,pad=0.3",
                      "facecolor": fill, "edgecolor": edge})
    for source, target, tag in data["edges"]:
        a, b = nodes[source], nodes[target]
        start = (a["x"] + 0.45, a["y"] + (0.05 if a["kind"] == "join" else 0.25))
        end = (b["x"] + 0.45, b["y"] - 0.15)
        style = {"arrowstyle": "->", "color": EDGE_COLOUR[tag], "lw": 0.8,
                 "connectionstyle": "arc3,rad=0" if abs(a["x"] - b["x"]) < 0.01 else "angle3,angleA=0,angleB=90"}
        if tag == "wrap":
            style.update(linestyle="--", connectionstyle="arc3,rad=0.1")
        axes.annotate("", xy=end, xytext=start, arrowprops=style)
        if tag in ("T", "F"):
            axes.text((start[0] + end[0]) / 2 + 0.05, (start[1] + end[1]) / 2, tag, fontsize=7,
                      color=EDGE_COLOUR[tag], fontweight="bold")
    return fig


__all__ = ["draw", "dot_program", "figure", "layout_json", "outline_dot", "render", "render_artifact", "to_dot"]
