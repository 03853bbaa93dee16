"""No import cycle among the product's modules (``dycl``, ``rewriter``, ``hcfg``, ``hostgen``).

Every import counts, module-level and function-level alike (a function-level import only
postpones a cycle); imports under ``if TYPE_CHECKING:`` do not run and are left out."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"dycl": "dycl", "rewriter": "dycl.rewriter", "hcfg": "dycl.hcfg", "hostgen": "dycl.hostgen"}


def _modules(root: Path) -> dict[str, Path]:
    modules = {}
    for folder, package in PACKAGES.items():
        for path in (root / folder).rglob("*.py"):
            parts = [p for p in path.relative_to(root / folder).with_suffix("").parts if p != "__init__"]
            modules[".".join([package, *parts])] = path
    return modules


def _runtime_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    type_only = {id(node) for branch in ast.walk(tree)
                 if isinstance(branch, ast.If) and "TYPE_CHECKING" in ast.unparse(branch.test)
                 for node in ast.walk(branch)}
    return [node for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in type_only]


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the product modules it imports (a name imported from a package resolves to
    the submodule of that name where there is one, else to the package)."""
    modules = _modules(root)

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _runtime_imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [resolve(alias.name) for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    kept = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(kept + ([base] if base else []))
                targets = [resolve(f"{base}.{alias.name}") or resolve(base) for alias in node.names]
            graph[name].update(t for t in targets if t and t != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for successor in graph[node]:
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while (member := stack.pop()) != node:
                component.append(member)
            if component:
                found.append(sorted([node, *component]))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_the_product_has_no_import_cycle():
    graph = import_graph(ROOT)
    assert len(graph) > 100 and "dycl.hcfg.graph" in graph["dycl.hcfg.annotate"]
    assert cycles(graph) == []


@pytest.mark.parametrize("lazy", [False, True])
def test_a_cycle_is_found_whether_the_import_is_at_module_level_or_in_a_function(tmp_path, lazy):
    for folder in PACKAGES:
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "hcfg" / "a.py").write_text("from dycl.hcfg.b import g\n")
    inner = "def f():\n    from dycl.hcfg.a import g\n" if lazy else "from dycl.hcfg import a\n"
    (tmp_path / "hcfg" / "b.py").write_text(inner + "from typing import TYPE_CHECKING\n"
                                            "if TYPE_CHECKING:\n    from dycl.hcfg.c import h\n")
    (tmp_path / "hcfg" / "c.py").write_text("from dycl.hcfg.b import g\n")  # only a type-checking edge back
    assert cycles(import_graph(tmp_path)) == [["dycl.hcfg.a", "dycl.hcfg.b"]]
