"""Pass: a dict display read only at literal keys and spread by ``**`` becomes one variable per key.

Library code gathers keyword arguments in a dict and spreads it into calls dycl does not
inline (transformers' ``mask_kwargs = {"config": self.config, "inputs_embeds": h, ...}`` then
``create_causal_mask(**mask_kwargs)``), and keeps results in a dict read at static keys
(``causal_mask_mapping[self.config.layer_types[i]]``). A dict holding a config object and
tensors is a value neither a sub-DNN nor the host keeps; where the dict never escapes it is not
needed: each entry is a variable of its own (scalar replacement of an aggregate), each read
``d["k"]`` that variable, each ``f(**d)`` the keywords ``f(k=...)``, as Python binds them.

Assumes: loop-free code after ``ConstantPropagation`` (a key the flow knows is a literal by now);
``flow.evaluate`` under the unit's entry facts gives the ``Static`` of an expression whose names
the body never rebinds, else None.
Guarantees: a statement ``d = {k1: v1, ...}`` (one name target; keys literal strings or
integers, each once; no ``**`` entry) whose name is read nowhere but in the statements after it
in its block, and there only as ``d[ki]`` or ``**d`` at a call (string keys that are
identifiers, none also given by name), with no binding of ``d`` or write through it there,
becomes ``d_ki = vi`` per key in display order (each value evaluated once, in order, as the
display evaluates them), except a value that is a static literal or a static attribute path of
names the body never rebinds (written at its reads, as constant propagation writes a static
value's term), or a name no later statement of the block rebinds (read as it is: the same
object). Every read becomes the entry's variable or value, ``**d`` the keywords in display order.
Any other dict, and any dict the rule cannot prove private, is left as it was.
"""

from __future__ import annotations

import keyword
from collections import Counter
from collections.abc import Iterable

import libcst as cst
from dycl.rewriter.exits import Block, with_inner_blocks
from dycl.rewriter.passes import FunctionUnit
from dycl.rewriter.values import is_literal, literal_term
from dycl.rewriter.walk import all_names, bound_names, children, descendants, read_names

Key = str | int
#: nodes whose ``target`` (``name`` for ``AsName``) binds or writes
_TARGETS = (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.Del, cst.NamedExpr, cst.For, cst.CompFor)
_SCALARS = (bool, int, float, str, type(None))
_LITERALS = (cst.Integer, cst.Float, cst.SimpleString)
_EQUAL = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


class DictDisplays:
    """Scalar replacement of private dict displays (see the module docstring)."""

    name = "dict_displays"
    description = "a dict display read only at literal keys and by ** becomes one variable per key"

    def __init__(self, unit: FunctionUnit) -> None:
        self.unit = unit
        self.reads: Counter[str] = Counter()
        self.assigned: set[str] = set()

    def run(self, body: Block) -> Block:
        for stmt in body:
            self.reads.update(_read_counts(stmt))
            self.assigned |= bound_names(stmt)
        return self.block(body)

    def block(self, stmts: Block) -> Block:
        stmts = [with_inner_blocks(stmt, self.block) or stmt for stmt in stmts]
        k = 0
        while k < len(stmts):  # a replaced display's lines are looked at again (a display inside a display)
            stmts = self.scalarize(stmts, k) or stmts
            k += 1
        return stmts

    def scalarize(self, stmts: Block, k: int) -> Block | None:
        """``stmts`` with the display at ``k`` replaced, or None where it is not one the rule covers."""
        display = _display(stmts[k])
        if display is None:
            return None
        name, entries = display
        later = stmts[k + 1:]
        if name in read_names(stmts[k].body[0].value) or _writes(later, name) or (
                sum(_read_counts(stmt)[name] for stmt in later) != self.reads[name]):
            return None  # read before it, rebound or written through after it, or read elsewhere
        lines: Block = []
        values: dict[Key, cst.BaseExpression] = {}
        rebound = set().union(*(bound_names(stmt) for stmt in later))
        for key, value in entries:
            values[key] = self.static_value(value)
            if values[key] is None and isinstance(value, cst.Name) and value.value not in rebound:
                values[key] = value  # a name nothing rebinds after the display: the same object at every read
            if values[key] is None:
                variable = self.unit.ctx.namespace.fresh(f"{name}_{key}")
                lines.append(stmts[k].with_changes(body=[cst.Assign([cst.AssignTarget(cst.Name(variable))], value)]))
                values[key] = cst.Name(variable)
        reads = _ReplaceReads(name, values)
        replaced = [stmt.visit(reads) for stmt in later]
        counts = sum((_read_counts(stmt) for stmt in replaced), Counter())
        if reads.failed or counts[name]:
            return None
        for line in lines:  # the new variables' reads, for a display that is an entry's value
            self.reads[line.body[0].targets[0].target.value] = counts[line.body[0].targets[0].target.value]
        return stmts[:k] + lines + replaced

    def static_value(self, value: cst.BaseExpression) -> cst.BaseExpression | None:
        """What a read of an entry holding ``value`` may be written as instead of a variable: a
        static scalar's literal, or a static attribute path of names the body never rebinds."""
        if read_names(value) & self.assigned or not _is_attribute_path(value):
            return None
        static = self.unit.flow.evaluate(value, self.unit.env)
        if static is None:
            return None
        if isinstance(static.value, _SCALARS) and is_literal(static.value):
            return value if isinstance(value, _LITERALS) else literal_term(static.value)
        return value if static.substitutable else None


class _ReplaceReads(cst.CSTTransformer):
    """Replaces ``name[key]`` by ``values[key]`` and ``**name`` at a call by keywords; sets
    ``failed`` where a spread cannot be written as keywords."""

    def __init__(self, name: str, values: dict[Key, cst.BaseExpression]) -> None:
        super().__init__()
        self.name = name
        self.values = values
        self.failed = False

    def leave_Subscript(self, original: cst.Subscript, updated: cst.Subscript) -> cst.BaseExpression:
        key = _subscript_key(updated)
        if isinstance(updated.value, cst.Name) and updated.value.value == self.name and key in self.values:
            return self.values[key].deep_clone()
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if not any(_is_pack(arg, self.name) for arg in updated.args):
            return updated
        given = [arg.keyword.value for arg in updated.args if arg.keyword is not None]
        keys = list(self.values)
        packs = sum(_is_pack(arg, self.name) for arg in updated.args)
        if packs > 1 or not all(isinstance(key, str) and key.isidentifier() and not keyword.iskeyword(key)
                                for key in keys) or set(given) & set(keys):
            self.failed = True  # Python raises TypeError here: the call stays as written, the dict too
            return updated
        args: list[cst.Arg] = []
        for arg in updated.args:
            if _is_pack(arg, self.name):
                args += [cst.Arg(self.values[key].deep_clone(), keyword=cst.Name(key), equal=_EQUAL) for key in keys]
            else:
                args.append(arg)
        return updated.with_changes(args=[arg.with_changes(comma=cst.MaybeSentinel.DEFAULT) for arg in args])


def _display(stmt: cst.BaseStatement) -> tuple[str, list[tuple[Key, cst.BaseExpression]]] | None:
    """``(name, [(key, value), ...])`` of a line ``name = {key: value, ...}`` with literal keys, each once."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    if not isinstance(small, cst.Assign) or len(small.targets) != 1 or not isinstance(
            small.targets[0].target, cst.Name) or not isinstance(small.value, cst.Dict):
        return None
    entries: list[tuple[Key, cst.BaseExpression]] = []
    for element in small.value.elements:
        key = _literal_key(element.key) if isinstance(element, cst.DictElement) else None
        if key is None or any(key == seen for seen, _ in entries):
            return None
        entries.append((key, element.value))
    return small.targets[0].target.value, entries


def _literal_key(node: cst.BaseExpression) -> Key | None:
    if isinstance(node, cst.SimpleString) and isinstance(node.evaluated_value, str):
        return node.evaluated_value
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    return None


def _subscript_key(node: cst.Subscript) -> Key | None:
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return None
    return _literal_key(node.slice[0].slice.value)


def _is_pack(arg: cst.Arg, name: str) -> bool:
    return arg.star == "**" and isinstance(arg.value, cst.Name) and arg.value.value == name


def _is_attribute_path(node: cst.BaseExpression) -> bool:
    """``a.b.c`` or a bare name (``None`` included); literals count as paths of length zero."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return isinstance(node, (cst.Name, *_LITERALS))


def _writes(stmts: Iterable[cst.BaseStatement], name: str) -> bool:
    """Whether a statement of ``stmts`` binds ``name`` or writes through it (``name[k] = v``,
    ``del name[k]``, ``name.x += 1``): any target that mentions it."""
    for stmt in stmts:
        for node in descendants(stmt):
            if isinstance(node, _TARGETS) and name in all_names(node.target):
                return True
            if isinstance(node, cst.AsName) and name in all_names(node.name):
                return True
    return False


def _read_counts(node: cst.CSTNode) -> Counter[str]:
    """How many times each name is read below ``node`` (attribute and keyword names, and a
    plain name an assignment binds, are not reads; a name in any other target counts)."""
    counts: Counter[str] = Counter()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            counts[current.value] += 1
        elif isinstance(current, cst.Attribute):
            stack.append(current.value)
        elif isinstance(current, cst.Arg):
            stack.append(current.value)
        elif isinstance(current, cst.AssignTarget) and isinstance(current.target, cst.Name):
            continue
        else:
            stack.extend(children(current))
    return counts
