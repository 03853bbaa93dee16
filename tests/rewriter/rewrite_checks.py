"""Shared helpers for the rewriter equivalence tests (imported by the test files)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

import torch

from dycl import rewriter
from dycl.harness.testing import assert_equivalent

_LOOP_NODES = (ast.For, ast.AsyncFor, ast.While, ast.Break, ast.Continue)


@dataclass
class Checked:
    """A rewrite that passed the equivalence check, with its parsed plain source."""

    rewritten: rewriter.RewrittenFunction
    tree: ast.Module
    paths: int

    @property
    def source(self) -> str:
        return self.rewritten.plain_source


def build(cls, *args, seed: int = 0, **kwargs) -> torch.nn.Module:
    """``cls(*args, **kwargs)`` built under a fixed seed, in eval mode."""
    torch.manual_seed(seed)
    return cls(*args, **kwargs).eval()


def randn_inputs(*shape: int, count: int = 40, seed: int = 1, scale: float = 3.0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator) * scale for _ in range(count)]


def randn_pairs(shape_a, shape_b, count: int = 40, seed: int = 1, scale: float = 3.0) -> list[tuple]:
    generator = torch.Generator().manual_seed(seed)
    return [(torch.randn(*shape_a, generator=generator) * scale, torch.randn(*shape_b, generator=generator) * scale)
            for _ in range(count)]


def check(model: torch.nn.Module, inputs, min_paths: int = 2) -> Checked:
    """Rewrite ``model``, check the rewrite against eager execution on ``inputs``
    (identical outputs, at least ``min_paths`` distinct eager paths), and check
    that the rewritten source is loop-free."""
    rewritten = rewriter.rewrite(model)
    paths = assert_equivalent(model, rewritten.bind(model), inputs, min_paths=min_paths)
    assert paths >= min_paths
    tree = ast.parse(rewritten.plain_source)
    assert_loop_free(tree)
    return Checked(rewritten, tree, paths)


def assert_loop_free(tree: ast.AST) -> None:
    leftovers = [type(node).__name__ for node in ast.walk(tree) if isinstance(node, _LOOP_NODES)]
    assert not leftovers, f"rewritten source still has {leftovers}"


def ifs(tree: ast.AST) -> list[ast.If]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.If)]


def count_ifs(tree: ast.AST) -> int:
    return len(ifs(tree))


def if_tests(tree: ast.AST) -> list[str]:
    return [ast.unparse(node.test) for node in ifs(tree)]


def assert_no_static_ifs(tree: ast.AST) -> None:
    """Every remaining ``if`` must test something computed at run time: its test
    has to mention a local name other than ``self`` (a test made only of
    literals and ``self.<attr>`` chains is static and should have been folded)."""
    for node in ifs(tree):
        names = {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)} - {"self", "torch"}
        assert names, f"static if left in the rewritten source: if {ast.unparse(node.test)}:"


def called_indices(source: str, attribute: str) -> list[str]:
    """The subscripts of ``self.<attribute>[...]`` in source order, e.g. ['0', '2']."""
    return re.findall(rf"self\.{re.escape(attribute)}\[([^\]]+)\]", source)
