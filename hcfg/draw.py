"""Draw an HCFG as a flowchart with matplotlib (no Graphviz needed).

Nodes are laid out in program order, one per row; the branches of a condition
are indented one column. Sub-DNNs are blue boxes labelled with their first
statement, conditions orange diamonds, host operations plain text, returns
grey ovals. Arrows follow control flow; the two edges out of a condition are
labelled T and F.
"""

from __future__ import annotations

from dataclasses import dataclass

from hcfg.graph import HCFG, Block, Cond, HostOp, Return, SubDNN, source_of


@dataclass
class _Placed:
    row: int
    column: int
    label: str
    kind: str


def _label(node) -> tuple[str, str]:
    if isinstance(node, SubDNN):
        first = source_of(node.statements[0].body[0])
        more = f" (+{len(node.statements) - 1})" if len(node.statements) > 1 else ""
        return f"{node.name}: {first[:48]}{more}", "sub_dnn"
    if isinstance(node, HostOp):
        return source_of(node.statement.body[0])[:56], "host"
    if isinstance(node, Return):
        return f"return {source_of(node.value)[:48]}", "return"
    return f"if {source_of(node.statement.test)[:52]}", "cond"


def layout(graph: HCFG) -> tuple[list[_Placed], list[tuple[int, int, str]]]:
    placed: list[_Placed] = []
    edges: list[tuple[int, int, str]] = []

    def block(nodes: Block, column: int, preds: list[tuple[int, str]]) -> list[tuple[int, str]]:
        for node in nodes:
            if not preds:
                break
            label, kind = _label(node)
            index = len(placed)
            placed.append(_Placed(index, column, label, kind))
            edges.extend((p, index, tag) for p, tag in preds)
            if isinstance(node, Return):
                preds = []
            elif isinstance(node, Cond):
                then_exits = block(node.then, column + 1, [(index, "T")]) if node.then else [(index, "T")]
                else_exits = block(node.orelse, column + 1, [(index, "F")]) if node.orelse else [(index, "F")]
                preds = then_exits + else_exits
            else:
                preds = [(index, "")]
        return preds

    block(graph.body, 0, [(-1, "")])
    return placed, [e for e in edges if e[0] >= 0]


def layout_json(graph: HCFG) -> dict:
    """The flowchart layout as plain data (saved in artifacts as ``hcfg.json``)."""
    placed, edges = layout(graph)
    return {"title": f"HCFG of {graph.name}: {len(graph.sub_dnns)} sub-DNNs, {len(graph.conditions)} conditions",
            "nodes": [[p.row, p.column, p.label, p.kind] for p in placed], "edges": [list(e) for e in edges]}


def draw(graph: HCFG, path: str, max_nodes: int = 400) -> str:
    """Write the flowchart of ``graph`` to ``path`` (PNG or SVG); returns ``path``."""
    return draw_layout(layout_json(graph), path, max_nodes)


def draw_layout(data: dict, path: str, max_nodes: int = 400) -> str:
    """Draw a layout made by ``layout_json``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    placed = [_Placed(*node) for node in data["nodes"]][:max_nodes]
    edges = [tuple(e) for e in data["edges"]]
    rows = max(len(placed), 1)
    columns = max((p.column for p in placed), default=0) + 1
    figure, axes = plt.subplots(figsize=(4 + 2.2 * columns + 4, 0.42 * rows + 1))
    styles = {
        "sub_dnn": {"boxstyle": "round,pad=0.3", "facecolor": "#dbe8fb", "edgecolor": "#3b6fb6"},
        "cond": {"boxstyle": "sawtooth,pad=0.3", "facecolor": "#fde9c9", "edgecolor": "#c98a1b"},
        "host": {"boxstyle": "square,pad=0.2", "facecolor": "white", "edgecolor": "#bbbbbb"},
        "return": {"boxstyle": "round4,pad=0.3", "facecolor": "#e6e6e6", "edgecolor": "#777777"},
    }
    for p in placed:
        axes.text(p.column * 1.0, -p.row, p.label, fontsize=8, family="monospace", va="center", ha="left",
                  bbox=styles[p.kind])
    shown = len(placed)
    for source, target, tag in edges:
        if source >= shown or target >= shown:
            continue
        a, b = placed[source], placed[target]
        axes.annotate("", xy=(b.column - 0.05, -b.row), xytext=(a.column - 0.05, -a.row),
                      arrowprops={"arrowstyle": "->", "color": "#888888", "connectionstyle": "arc3,rad=-0.3"})
        if tag:
            axes.text(a.column - 0.2, -(a.row + b.row) / 2, tag, fontsize=7, color="#c98a1b")
    axes.set_xlim(-0.5, columns + 6)
    axes.set_ylim(-rows, 1)
    axes.axis("off")
    axes.set_title(data["title"], fontsize=10)
    figure.savefig(path, bbox_inches="tight", dpi=110)
    plt.close(figure)
    return path
