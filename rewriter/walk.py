"""Fast read-only traversals of libcst trees.

libcst's visitor protocol rebuilds every node it passes, which dominates the
rewriter's time on large unrolled functions; analyses that only read the tree
use these generators instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import libcst as cst
from dycl.rewriter.precedence import in_slot

_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}
_SKIPPED = {"whitespace", "header", "footer", "leading_lines", "lines_after_decorators", "trailing_whitespace",
            "lpar", "rpar", "semicolon", "comma", "colon", "equal", "dot", "whitespace_before", "whitespace_after",
            "whitespace_before_colon", "whitespace_after_colon", "newline", "first_line", "empty_lines"}


def _fields(node_type: type) -> tuple[str, ...]:
    names = _CHILD_FIELDS.get(node_type)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(node_type) if f.name not in _SKIPPED
                      and not f.name.startswith("whitespace"))
        _CHILD_FIELDS[node_type] = names
    return names


_NODE_TYPES: dict[type, bool] = {}

COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


def is_node(value: object) -> bool:
    """``isinstance(value, cst.CSTNode)`` without the cost of an ABC check."""
    kind = type(value)
    known = _NODE_TYPES.get(kind)
    if known is None:
        known = _NODE_TYPES[kind] = isinstance(value, cst.CSTNode)
    return known


_IS_A: dict[tuple[type, tuple[type, ...]], bool] = {}


def is_a(node: object, classes: tuple[type, ...]) -> bool:
    """``isinstance(node, classes)`` for libcst classes, without the cost of ABC checks
    (one lookup of the node's type and ``classes``; libcst classes are never registered
    as virtual subclasses, so the MRO decides)."""
    key = (type(node), classes)
    known = _IS_A.get(key)
    if known is None:
        mro = type(node).__mro__
        known = _IS_A[key] = any(c in mro for c in classes)
    return known


def children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    for name in _fields(type(node)):
        value = getattr(node, name)
        if is_node(value):
            yield value
        elif type(value) in (tuple, list):
            for item in value:
                if is_node(item):
                    yield item


def _child_list(node: cst.CSTNode) -> list[cst.CSTNode]:
    """``list(children(node))``, without a generator (the walks' hot path)."""
    found = []
    for name in _fields(type(node)):
        value = getattr(node, name)
        kind = type(value)
        if kind is tuple or kind is list:
            found.extend(item for item in value if is_node(item))
        elif is_node(value):
            found.append(value)
    return found


def descendants(node: cst.CSTNode, stop: tuple[type, ...] = ()) -> Iterator[cst.CSTNode]:
    """``node`` and every node below it, pre-order; does not enter nodes of type ``stop``
    (they are yielded themselves)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if stop and current is not node and is_a(current, stop):
            continue
        below = _child_list(current)
        below.reverse()
        stack.extend(below)


def all_names(node: cst.CSTNode) -> set[str]:
    """Every ``Name`` below ``node``, whatever its role (read, bound, attribute, keyword)."""
    return {current.value for current in descendants(node) if type(current) is cst.Name}


def target_names(target: cst.CSTNode) -> Iterator[str]:
    """Names bound by an assignment target (``a``, ``a, (b, *c)``)."""
    if isinstance(target, cst.Name):
        yield target.value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from target_names(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from target_names(target.value)


def bound_names(node: cst.CSTNode) -> set[str]:
    """Names bound anywhere in a statement, block or function (parameters, every
    assignment target, loop targets, ``with ... as``, ``del``); names bound inside
    comprehensions and lambdas do not count."""
    names: set[str] = set()
    for current in descendants(node, stop=_NO_BINDINGS):
        if not is_a(current, _BINDERS):  # most nodes (names, calls, operators): one cached lookup
            continue
        if isinstance(current, cst.Param):
            names.add(current.name.value)
        elif isinstance(current, cst.AsName):
            names.update(target_names(current.name))
        else:
            names.update(target_names(current.target))
    return names


#: scopes whose bindings are their own; nodes that bind names
_NO_BINDINGS = (cst.Lambda, *COMPREHENSIONS)
_BINDERS = (cst.Param, cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr, cst.Del, cst.AsName)


def small_statement_targets(small: cst.BaseSmallStatement) -> set[str]:
    """Names a small statement assigns (``a, b = ...``, ``n += 1``, ``del t``)."""
    if isinstance(small, cst.Assign):
        return {name for target in small.targets for name in target_names(target.target)}
    if isinstance(small, (cst.AugAssign, cst.AnnAssign, cst.Del)):
        return set(target_names(small.target))
    return set()


def read_names(node: cst.CSTNode) -> set[str]:
    """Names read anywhere below ``node`` (attribute names and pure assignment targets excluded)."""
    names: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            names.add(current.value)
            continue
        if isinstance(current, cst.Attribute):
            stack.append(current.value)
            continue
        if isinstance(current, cst.AssignTarget):
            stack.extend(_target_reads(current.target))
            continue
        if isinstance(current, cst.Arg):
            stack.append(current.value)
            continue
        stack.extend(_child_list(current))
    return names


def _target_reads(target: cst.BaseExpression) -> list[cst.CSTNode]:
    """The parts of an assignment target that are read (``a[i].b = ...`` reads ``a`` and ``i``)."""
    if isinstance(target, (cst.Tuple, cst.List)):
        return [part for element in target.elements for part in _target_reads(element.value)]
    if isinstance(target, cst.StarredElement):
        return _target_reads(target.value)
    if isinstance(target, (cst.Attribute, cst.Subscript)):
        return [target]
    return []


def statements_contain(stmts, kinds: tuple[type, ...], into_loops: bool) -> bool:
    """Whether a statement or small statement of type ``kinds`` occurs in ``stmts``
    (not looking inside expressions; inside loops only if ``into_loops``)."""
    stack = list(stmts)
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, kinds):
            return True
        if isinstance(stmt, cst.SimpleStatementLine):
            stack.extend(stmt.body)
        elif isinstance(stmt, (cst.For, cst.While)) and not into_loops:
            continue
        elif isinstance(stmt, (cst.If, cst.For, cst.While, cst.With, cst.Try, cst.Else)):
            stack.extend(stmt.body.body)
            orelse = getattr(stmt, "orelse", None)
            if orelse is not None:
                stack.append(orelse)
    return False


# Fields that hold names rather than expressions: never rewritten by ``map_children``.
_NAME_FIELDS: dict[type, tuple[str, ...]] = {cst.Attribute: ("attr",), cst.Arg: ("keyword",)}


def map_children(node: cst.CSTNode, transform) -> cst.CSTNode:
    """``node`` with ``transform`` applied to each child expression (attribute and
    keyword names excepted); the node itself is only rebuilt if a child changed, and a
    changed child gets the parentheses its place needs (``rewriter.precedence``)."""
    skipped = _NAME_FIELDS.get(type(node), ())
    changes = {}
    for name in _fields(type(node)):
        if name in skipped:
            continue
        value = getattr(node, name)
        if is_node(value):
            new = transform(value)
            if new is not value:
                changes[name] = in_slot(node, name, new)
        elif type(value) in (tuple, list) and value and is_node(value[0]):
            new_items = [transform(item) for item in value]
            if any(a is not b for a, b in zip(new_items, value)):
                changes[name] = new_items
    return node.with_changes(**changes) if changes else node


_SEQUENCES = (tuple, list)


def same_program(a: cst.CSTNode, b: cst.CSTNode) -> bool:
    """Whether ``a`` and ``b`` are the same tree, whitespace and comments aside (parentheses
    count): ``same_program(tree, cst.parse_module(printed).body[0])`` holds when ``tree``
    prints as text that Python reads as ``tree``."""
    pending = [(a, b)]
    while pending:
        left, right = pending.pop()
        if type(left) in _SEQUENCES and type(right) in _SEQUENCES:  # built with lists, parsed as tuples
            if len(left) != len(right):
                return False
            pending.extend(zip(left, right))
            continue
        # an optional token left to the printer (``Param.star``) is the empty one
        left = "" if left is cst.MaybeSentinel.DEFAULT else left
        right = "" if right is cst.MaybeSentinel.DEFAULT else right
        if type(left) is not type(right):
            return False
        if not is_node(left):
            if left != right:
                return False
            continue
        if len(getattr(left, "lpar", ())) != len(getattr(right, "lpar", ())):
            return False
        pending.extend((getattr(left, name), getattr(right, name)) for name in _fields(type(left)))
    return True
