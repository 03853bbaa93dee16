"""What a function's source binds, and where its attribute and item reads start (``ast``).

Shared by the checks that decide whether a user's helper works on tensors (``hcfg.traced_statics``)
or is a plain helper of numbers the host may copy (``hostgen.host_globals``). Assumes the tree of
one function; guarantees nothing about names bound in nested scopes beyond listing them too."""

from __future__ import annotations

import ast
from collections.abc import Iterator


def local_names(tree: ast.AST) -> set[str]:
    """Every argument and every name stored to in ``tree``."""
    return {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)} | {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def access_roots(tree: ast.AST) -> Iterator[ast.expr]:
    """For every ``a.b`` and ``a[i]`` in ``tree``, the expression the chain starts from (through
    calls: ``x.view(1).sum`` starts from ``x``)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            root = node.value
            while isinstance(root, (ast.Attribute, ast.Subscript, ast.Call)):
                root = root.func if isinstance(root, ast.Call) else root.value
            yield root
