"""Which host variables may name the same Python object (a dict, a list, a module state slot).

After ``s = state_stats`` a host operation ``s["calls"] = ...`` changes what ``state_stats``
holds, although it names only ``s``. Passes that move code past host operations (``hcfg.optimize
.merge_into_producers``) compare the names a node writes with the names another reads; they must
compare alias classes instead.

Assumes: host operations bind names only by assignment (the rewriter's output: no ``global``,
no ``nonlocal``), and a name's object can only reach another name through an assignment whose
value mentions it.
Guarantees (over-approximation, never under): two locals that may hold the same object, or one an
object inside the other, are in one class — every assignment in a host operation puts its target
names in one class with every local whose object its value may be or hold (``a = b``,
``a = b["k"]``, ``a = b.get("k")``, ``a, c = b, d``, ``a = [b]``; not ``m = n * 2``: arithmetic
makes a new object). Classes are closed under the relation (union-find).
"""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst
from dycl.hcfg.nodes import Block, HostOp, walk
from dycl.rewriter.walk import descendants


def alias_classes(body: Block, locals_: frozenset[str]) -> dict[str, frozenset[str]]:
    """Each local that shares a class with another local -> its class (names alone in theirs are left out)."""
    parent: dict[str, str] = {}

    def find(name: str) -> str:
        while parent.setdefault(name, name) != name:
            name = parent[name]
        return name

    for node in walk(body):
        if not isinstance(node, HostOp):
            continue
        for small in node.statement.body:
            group = _assignment_names(small) & locals_
            for name in list(group)[1:]:
                parent[find(name)] = find(next(iter(group)))
    classes: dict[str, set[str]] = {}
    for name in parent:
        classes.setdefault(find(name), set()).add(name)
    return {name: frozenset(members) for members in classes.values() if len(members) > 1 for name in members}


def with_aliases(names: Iterable[str], classes: dict[str, frozenset[str]]) -> set[str]:
    """``names`` and every name that may share an object with one of them."""
    out: set[str] = set()
    for name in names:
        out |= classes.get(name, {name})
    return out


def _assignment_names(small: cst.BaseSmallStatement) -> set[str]:
    """The target names of an assignment together with the names whose objects its value may be
    or hold (empty if no assignment). An item or attribute target (``d["k"] = v``) puts ``v``
    inside ``d``'s object: ``d`` counts as a target."""
    if isinstance(small, cst.Assign):
        targets: list[cst.CSTNode] = [t.target for t in small.targets]
    elif isinstance(small, (cst.AnnAssign, cst.AugAssign)):
        targets = [small.target]
    else:
        return set()
    if small.value is None:
        return set()
    names = {n.value for target in targets for n in descendants(target) if isinstance(n, cst.Name)}
    return names | _roots(small.value)


def _roots(value: cst.BaseExpression) -> set[str]:
    """Names whose objects ``value`` may be or hold: a name, the base of an item or attribute, both
    sides of ``or``/``and``/``if-else``, a display's elements, and every name in a call (a function
    may return its argument or an item of its receiver); none for arithmetic, comparisons and
    literals, which make new objects (numbers, booleans, tensors)."""
    if isinstance(value, cst.Name):
        return {value.value}
    if isinstance(value, (cst.Attribute, cst.Subscript)):
        return _roots(value.value)
    if isinstance(value, cst.BooleanOperation):
        return _roots(value.left) | _roots(value.right)
    if isinstance(value, cst.IfExp):
        return _roots(value.body) | _roots(value.orelse)
    if isinstance(value, (cst.Tuple, cst.List, cst.Set)):
        return {name for element in value.elements for name in _roots(element.value)}
    if isinstance(value, cst.Dict):
        return {name for element in value.elements for name in _roots(element.value)}
    if isinstance(value, (cst.Call, cst.Await, cst.NamedExpr, cst.BaseComp)):
        return {n.value for n in descendants(value) if isinstance(n, cst.Name)}
    return set()
