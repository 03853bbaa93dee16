"""Which sub-DNNs compute the same shapes: one symbolic run serves them all.

An unrolled network calls one block class many times. BlockDrop's 54 residual blocks are
54 sub-DNNs ``x_1 = F.relu(residual + self.rnet.blocks[s][k](x_1))`` that differ only in
the block they call; given inputs of the same symbolic shapes, their symbolic runs
(``hcfg.symbolic``) compute the same output shapes when the blocks have the same structure.
``run_key`` names what a run depends on, so that explore runs one of them and reuses its
result for the others (``SymbolicShapes.run_tensor_code``).

Assumes: a symbolic run that succeeds reads no tensor data of the model: its tensors are
fake (an op that needs data gives an unbacked size, and the run is refused), so what it
computes depends only on the statements, the Python values they reach, and the structure
of the modules they call, which ``rewriter.values.fingerprint`` describes (class,
configuration attributes, parameter and buffer shapes and dtypes, submodules).
Guarantees: two lists of statements get equal keys only if their text is the same once
each *module path* (a name that is not a local of the graph and holds a module -- the
model -- then attributes and literal subscripts) is replaced by a token of the value it
reaches: a module's fingerprint, a literal's type and text, a tensor's shape, dtype and
strides. A path that reaches any other value (a bound method), or cannot be followed,
gives no key (the run is not shared). Other names keep their text: locals are the run's
inputs, and globals are one table for the whole graph.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

import libcst as cst
import torch
from dycl.hcfg.pycode import Printer
from dycl.rewriter.values import fingerprint, holds_container, is_literal

#: stands for every module path in a key's text; the tokens say which value each one reached
_PLACEHOLDER = "__dycl_path__"


class _NoKey(Exception):
    """A path whose value cannot be described by structure: this run is not shared."""


def run_key(statements: Sequence[cst.BaseStatement], state: dict[str, Any], locals_: frozenset[str],
            fingerprints: dict[int, tuple]) -> tuple | None:
    """The key of running ``statements`` on ``state`` symbolically (see the module docstring),
    or None; ``locals_`` are the graph's local names (their values are the run's inputs)."""
    tokens: list[tuple] = []

    def substitute(node: cst.BaseExpression) -> str | None:
        if not isinstance(node, cst.Name | cst.Attribute | cst.Subscript):
            return None
        steps = _path(node)
        if steps is None or steps[0] in locals_ or not isinstance(state.get(steps[0]), torch.nn.Module):
            return None
        tokens.append(_token(_follow(state[steps[0]], steps[1:]), fingerprints))
        return _PLACEHOLDER

    printer = Printer(substitute)
    try:
        texts = tuple(printer.statement(stmt) for stmt in statements)
    except _NoKey:
        return None
    return texts, tuple(tokens)


def _path(node: cst.CSTNode) -> list[Any] | None:
    """``a.b[0]['k']`` as ``["a", ("attr", "b"), ("item", 0), ("item", "k")]``; None for
    anything else (a call, an index that is not a literal)."""
    steps: list[Any] = []
    while True:
        if isinstance(node, cst.Name):
            return [node.value, *reversed(steps)]
        if isinstance(node, cst.Attribute) and not node.lpar:
            steps.append(("attr", node.attr.value))
            node = node.value
        elif isinstance(node, cst.Subscript) and not node.lpar and _literal_index(node) is not None:
            steps.append(("item", ast.literal_eval(_literal_index(node).value)))
            node = node.value
        else:
            return None


def _literal_index(node: cst.Subscript) -> cst.Integer | cst.SimpleString | None:
    index = node.slice[0].slice if len(node.slice) == 1 else None
    if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer | cst.SimpleString):
        return index.value
    return None


def _follow(value: Any, steps: list[tuple[str, Any]]) -> Any:
    """The value ``steps`` reach from ``value``, looked up without running user code (no
    property, no ``__getitem__`` of a user class): where that is not possible, no key."""
    for kind, key in steps:
        value = _attribute(value, key) if kind == "attr" else _item(value, key)
    return value


def _attribute(value: Any, name: str) -> Any:
    if isinstance(value, torch.Tensor) and name == "shape":
        return value.shape
    if not isinstance(value, torch.nn.Module) or any(name in vars(kind) for kind in type(value).__mro__):
        raise _NoKey  # a class attribute, method or property: its value may be computed
    for table in (vars(value), value._parameters, value._buffers, value._modules):
        if name in table:
            return table[name]
    raise _NoKey


_CONTAINERS = (torch.nn.ModuleList, torch.nn.Sequential, torch.nn.ModuleDict, torch.nn.ParameterList,
               list, tuple, dict, torch.Size)


def _item(value: Any, key: Any) -> Any:
    if type(value) not in _CONTAINERS:
        raise _NoKey  # a user class's __getitem__ runs user code
    try:
        return value[key]
    except (IndexError, KeyError, TypeError) as exc:  # the statement would raise too
        raise _NoKey from exc


def _token(value: Any, fingerprints: dict[int, tuple]) -> tuple:
    if isinstance(value, torch.nn.Module):
        return ("module", fingerprint(value, fingerprints))
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), value.dtype, value.stride(), value.layout)
    if is_literal(value) and not holds_container(value):
        return ("literal", type(value).__name__, repr(value))
    raise _NoKey


__all__ = ["run_key"]
