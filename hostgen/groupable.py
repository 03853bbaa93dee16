"""Whether a batched host's ``_sample`` may run once per group of samples (``GROUPED``).

``hostgen/host_groups.py`` runs ``_sample`` once for a group of samples, with ``Rows`` (the
group's rows of one array) in place of each sample's array. That gives each sample what
``_sample`` run on it alone gives only where ``_sample`` *moves* its tensors and reads them
with ``.item()`` alone, and where running it once instead of once per sample changes nothing
outside it. ``groupable`` proves this on the emitted method's source (Python's ``ast``):

- *tensors*: the per-sample inputs, every name a sub-DNN request (``yield``) assigns, and
  names assigned from a tensor (``a = b``); *lists*: names of list displays or ``append``
  targets that hold a tensor. A tensor may only be assigned whole, be an element of a tuple
  or list that is itself moved, be appended, be a request's argument, be returned, or be read
  for its truth or with ``.item()`` in an ``if`` test (``hostgen/host_groups.py``'s ``Items``: member by member
  up to the test's truth, the group's decision); a list may only be appended to, measured
  with ``len``, passed starred to a request, or returned, and is only ever assigned a list
  display (so ``append`` changes nothing but the group's own list).
- statements: assignments to names, augmented assignments of names that are neither,
  ``if``, ``return``, ``pass`` and expression statements; calls: ``.item()`` of a tensor
  (in a test), ``.append`` of a list, ``len``. Anything else (a loop, ``try``, an attribute or item
  store, any other call, a comprehension) and the host stays per sample.

Conservative by construction: a name is a tensor wherever it is one anywhere.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterable

_STATEMENTS = (ast.Assign, ast.AugAssign, ast.If, ast.Return, ast.Pass, ast.Expr)
_PLAIN = (ast.Constant, ast.BinOp, ast.BoolOp, ast.Compare, ast.UnaryOp, ast.IfExp, ast.Subscript,
          ast.Attribute, ast.Tuple, ast.List, ast.Dict, ast.Slice, ast.Name, ast.Yield, ast.Call, ast.Starred)


def groupable(body: Iterable[str], sample_inputs: Iterable[str]) -> bool:
    """True where the method whose body lines are ``body`` (any indentation) may run once per group."""
    try:
        # the body parsed as a module: the parser takes yield and return there (only compile refuses them)
        statements = ast.parse(textwrap.dedent("\n".join(body))).body
    except SyntaxError:
        return False
    nodes = [node for statement in statements for node in ast.walk(statement)]
    if not all(isinstance(node, _STATEMENTS) for node in nodes if isinstance(node, ast.stmt)):
        return False
    tensors, lists = _names(nodes, set(sample_inputs))
    return not tensors & lists and _Check(tensors, lists).statements(statements)


def _names(nodes: list[ast.AST], tensors: set[str]) -> tuple[set[str], set[str]]:
    """(tensors, lists), closed under assignment and ``append``."""
    lists: set[str] = set()
    while True:
        before = len(tensors), len(lists)
        for node in nodes:
            if isinstance(node, ast.Assign):
                targets = [name.id for target in node.targets for name in ast.walk(target)
                           if isinstance(name, ast.Name)]
                value = node.value
                if isinstance(value, ast.Yield) or _named(value, tensors):
                    tensors.update(targets)
                elif _named(value, lists) or isinstance(value, ast.List) and any(_named(e, tensors)
                                                                                 for e in value.elts):
                    lists.update(targets)
            elif _append(node) and _named(node.args[0], tensors):
                lists.add(node.func.value.id)
        if (len(tensors), len(lists)) == before:
            return tensors, lists


def _named(node: ast.AST, names: set[str]) -> bool:
    return isinstance(node, ast.Name) and node.id in names


def _append(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append"
            and isinstance(node.func.value, ast.Name) and len(node.args) == 1 and not node.keywords)


class _Check:
    """The rules of the module docstring, statement by statement."""

    def __init__(self, tensors: set[str], lists: set[str]) -> None:
        self.tensors, self.lists = tensors, lists

    def statements(self, statements: list[ast.stmt]) -> bool:
        return all(self.statement(statement) for statement in statements)

    def statement(self, node: ast.stmt) -> bool:
        if isinstance(node, ast.Assign):
            if len(node.targets) != 1 or not self.target(node.targets[0]):
                return False
            if any(_named(name, self.lists) for name in ast.walk(node.targets[0])):
                # a list of tensors is a list display or another such list, never another object
                # (what append changes is a list made in _sample)
                target, value = node.targets[0], node.value
                listed = isinstance(value, ast.List) and self.moved(value) or _named(value, self.lists)
                return isinstance(target, ast.Name) and listed
            return self.moved(node.value) or self.expression(node.value)
        if isinstance(node, ast.AugAssign):
            return isinstance(node.target, ast.Name) and not self.special(node.target) and self.expression(node.value)
        if isinstance(node, ast.If):
            return self.test(node.test) and self.statements(node.body) and self.statements(node.orelse)
        if isinstance(node, ast.Return):
            return node.value is None or self.moved(node.value) or self.expression(node.value)
        if isinstance(node, ast.Expr):
            return self.expression(node.value)
        return isinstance(node, ast.Pass)

    def target(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Tuple):
            return all(isinstance(element, ast.Name) for element in node.elts)
        return isinstance(node, ast.Name)

    def special(self, node: ast.expr) -> bool:
        return _named(node, self.tensors) or _named(node, self.lists)

    def moved(self, node: ast.expr) -> bool:
        """A value that moves tensors and lists whole: a name, or a tuple or list of moved values."""
        if isinstance(node, ast.Name):
            return True
        if isinstance(node, (ast.Tuple, ast.List)):
            return all(self.moved(element) or self.expression(element) for element in node.elts)
        return False

    def expression(self, node: ast.expr) -> bool:
        """An expression that reads tensors only with ``.item()`` and lists only with ``len``."""
        if not isinstance(node, _PLAIN) or self.special(node):
            return False
        if isinstance(node, ast.Yield):
            return self.request(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.Starred):
            return False
        return all(self.expression(child) for child in ast.iter_child_nodes(node) if isinstance(child, ast.expr))

    def test(self, node: ast.expr) -> bool:
        """An ``if`` test: tensors read for their truth (``if t``, under ``and``, ``or``, ``not``)
        or with ``.item()`` under arithmetic and comparisons (not ``is``, ``in``), beside
        expressions that read no tensor."""
        if _named(node, self.tensors):
            return True
        if isinstance(node, ast.BoolOp):
            return all(self.test(child) for child in node.values)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return self.test(node.operand)
        return self.operand(node)

    def operand(self, node: ast.expr) -> bool:
        """A value a test computes with: ``.item()`` of a tensor, arithmetic, comparisons."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "item":
            return not node.args and not node.keywords and _named(node.func.value, self.tensors)
        if isinstance(node, ast.Compare):
            return (not any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops)
                    and all(self.operand(child) for child in [node.left, *node.comparators]))
        if isinstance(node, ast.UnaryOp):  # ``not t`` is t's truth, a bool; -, +, ~ apply member by member
            return self.test(node.operand) if isinstance(node.op, ast.Not) else self.operand(node.operand)
        if isinstance(node, ast.BoolOp):  # gives one of its operands: none may be a tensor itself
            return all(self.operand(child) for child in node.values)
        if isinstance(node, ast.BinOp):
            return self.operand(node.left) and self.operand(node.right)
        return self.expression(node)

    def request(self, node: ast.Yield) -> bool:
        """``(yield (index, key, (arguments,)))``: arguments moved, lists starred."""
        value = node.value
        if not (isinstance(value, ast.Tuple) and len(value.elts) == 3 and isinstance(value.elts[2], ast.Tuple)):
            return False
        index, key, arguments = value.elts
        starred = [a for a in arguments.elts if isinstance(a, ast.Starred)]
        return (isinstance(index, ast.Constant) and self.expression(key)
                and all(_named(a.value, self.lists) for a in starred)
                and all(self.moved(a) or self.expression(a) for a in arguments.elts if not isinstance(a, ast.Starred)))

    def call(self, node: ast.Call) -> bool:
        func = node.func
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            return False
        if _append(node):
            return _named(func.value, self.lists) and (self.moved(node.args[0]) or self.expression(node.args[0]))
        if _named(func, {"len"}) and len(node.args) == 1:
            return _named(node.args[0], self.lists) or self.expression(node.args[0])
        return False


__all__ = ["groupable"]
