"""Make the writes to a threaded tensor slot's local exportable (``rewriter.state_threading``).

Assumes: ``body`` is the flat body with every chain to a slot replaced by the slot's local
name, and ``tensors`` names the locals of tensor slots (the function's parameters).

Guarantees (``local_writes``): a plain alias bound (once or more) only to one slot that is never rebound is
renamed to the slot; ``s.copy_(v)`` and ``f(..., out=s)`` on a line of their own become
rebindings of ``s`` with the same value; and ``s = s.clone()`` precedes every statement that
may write ``s`` in place, in the same block (so in the same sub-DNN): no sub-DNN writes one
of its inputs. What stays (a write through another alias or a view) is refused later by
``hcfg.aliasing`` or by the export checks.
"""

from __future__ import annotations

import libcst as cst


def local_writes(body: list[cst.BaseStatement], tensors: frozenset[str]) -> list[cst.BaseStatement]:
    """``body`` with the writes to ``tensors`` made exportable (see the module docstring)."""
    if not tensors:
        return body
    return _cloned_before_writes(_functional_writes(_aliases_replaced(body, tensors), tensors), tensors)


# Note: why ``s.copy_(v)`` and ``f(..., out=s)`` become assignments.
# Exporters translate neither (TorchScript has no ONNX ``aten::copy``; ``out=`` on a graph value is
# not traceable); as statements of their own they are rebindings of the slot with the same value.
def _functional_writes(body: list[cst.BaseStatement], tensors: frozenset[str]) -> list[cst.BaseStatement]:
    if not tensors:
        return body
    return [statement.visit(_Functional(tensors)) for statement in body]


class _Functional(cst.CSTTransformer):
    def __init__(self, tensors: frozenset[str]) -> None:
        super().__init__()
        self.tensors = tensors

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine,
                                  updated: cst.SimpleStatementLine) -> cst.BaseStatement:
        if len(updated.body) != 1:
            return updated
        small = updated.body[0]
        call = small.value if isinstance(small, (cst.Expr, cst.Assign)) else None
        if not isinstance(call, cst.Call):
            return updated
        text = self._rewritten(call)
        if text is None:
            return updated
        if isinstance(small, cst.Assign):
            targets = " = ".join(cst.Module([]).code_for_node(t.target) for t in small.targets)
            text = f"{text}; {targets} = {self._slot}"
        return cst.parse_statement(text + "\n").with_changes(trailing_whitespace=updated.trailing_whitespace)

    def _rewritten(self, call: cst.Call) -> str | None:
        code = cst.Module([]).code_for_node
        func = call.func
        positional = [a for a in call.args if a.keyword is None and not a.star]
        if (isinstance(func, cst.Attribute) and func.attr.value == "copy_" and isinstance(func.value, cst.Name)
                and func.value.value in self.tensors and len(call.args) == 1 and positional):
            self._slot = slot = func.value.value
            return f"{slot} = ({code(positional[0].value)}).to({slot}.dtype).expand_as({slot}).clone()"
        out = [a for a in call.args if a.keyword is not None and a.keyword.value == "out"]
        if len(out) == 1 and isinstance(out[0].value, cst.Name) and out[0].value.value in self.tensors:
            self._slot = slot = out[0].value.value
            rest = [a for a in call.args if a is not out[0]]
            if rest:
                rest[-1] = rest[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            return f"{slot} = ({code(call.with_changes(args=rest))}).to({slot}.dtype)"
        return None


# Note: why an alias of a tensor slot is replaced by the slot's name.
# ``buf = self.running; buf.mul_(m)`` writes the module's buffer through ``buf``. Threaded, the
# write must reach the slot's local: where every binding of ``buf`` is to the slot (once, or again
# as in ``buf = self.running`` repeated before each update) and the slot is never rebound, every
# ``buf`` is the slot's tensor, so the name can stand for it. Any other alias
# (bound on one path only, or to a view) is left, and ``hcfg.aliasing`` refuses its in-place update.
def _aliases_replaced(body: list[cst.BaseStatement], tensors: frozenset[str]) -> list[cst.BaseStatement]:
    counter = _BindingCounter()
    for statement in body:
        statement.visit(counter)
    aliases = {alias: next(iter(slots)) for alias, slots in counter.aliases.items()
               if len(slots) == 1 and counter.bindings.get(alias) == counter.alias_bindings.get(alias)
               and next(iter(slots)) in tensors and counter.bindings.get(next(iter(slots)), 0) == 0}
    if not aliases:
        return body
    renamer = _RenameAliases(aliases)
    return [statement.visit(renamer) for statement in body]


class _BindingCounter(cst.CSTVisitor):
    """How often each name is bound, and the names bound (somewhere) to a plain name: ``a = b``."""

    def __init__(self) -> None:
        super().__init__()
        self.bindings: dict[str, int] = {}
        self.aliases: dict[str, set[str]] = {}  # what each name is bound to by ``a = b``
        self.alias_bindings: dict[str, int] = {}  # how often so

    def _bound(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self.bindings[target.value] = self.bindings.get(target.value, 0) + 1
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bound(element.value)
        elif isinstance(target, cst.StarredElement):
            self._bound(target.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._bound(target.target)
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) and isinstance(
                node.value, cst.Name):
            alias = node.targets[0].target.value
            self.aliases.setdefault(alias, set()).add(node.value.value)
            self.alias_bindings[alias] = self.alias_bindings.get(alias, 0) + 1

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bound(node.target)

    # ``t += v`` on a tensor writes it in place: not a binding (names of other values are not aliases here)


class _RenameAliases(cst.CSTTransformer):
    """Drops ``alias = slot`` and names the slot wherever the alias was named."""

    def __init__(self, aliases: dict[str, str]) -> None:
        super().__init__()
        self.aliases = aliases

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        return updated.with_changes(value=self.aliases.get(updated.value, updated.value))

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)  # ``x.buf``: an attribute name, not the alias

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)  # ``f(buf=...)``: a keyword, not the alias

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine,
                                  updated: cst.SimpleStatementLine) -> cst.BaseStatement:
        kept = [small for small in updated.body if not (
            isinstance(small, cst.Assign) and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name) and isinstance(small.value, cst.Name)
            and small.targets[0].target.value == small.value.value)]
        return updated.with_changes(body=kept or [cst.Pass()])


# Note: why a tensor slot is cloned right before each statement that writes it in place.
# The slot's value is an input of the sub-DNN holding the write; an exporter told to mutate a
# graph input drops the mutation (TorchScript: "removing mutation ... on block input"). A clone
# in the same statement run makes the write one on a fresh local, in the same sub-DNN.
def _cloned_before_writes(body: list[cst.BaseStatement], tensors: frozenset[str]) -> list[cst.BaseStatement]:
    if not tensors:
        return body
    result: list[cst.BaseStatement] = []
    for statement in body:
        if isinstance(statement, cst.If):
            statement = statement.visit(_CloneInBlocks(tensors))
        elif isinstance(statement, cst.SimpleStatementLine):
            for name in sorted(_written_in_place(statement, tensors)):
                result.append(cst.SimpleStatementLine(
                    [cst.Assign([cst.AssignTarget(cst.Name(name))], cst.parse_expression(f"{name}.clone()"))],
                    trailing_whitespace=statement.trailing_whitespace))
        result.append(statement)
    return result


class _CloneInBlocks(cst.CSTTransformer):
    def __init__(self, tensors: frozenset[str]) -> None:
        super().__init__()
        self.tensors = tensors

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        return updated.with_changes(body=_cloned_before_writes(list(updated.body), self.tensors))


def _root(node: cst.BaseExpression) -> str | None:
    while isinstance(node, (cst.Attribute, cst.Subscript, cst.Call)):
        node = node.func if isinstance(node, cst.Call) else node.value
    return node.value if isinstance(node, cst.Name) else None


def _in_place_name(name: str) -> bool:
    return (name.startswith("__i") and name.endswith("__")) or (name.endswith("_") and not name.endswith("__"))


def _written_in_place(statement: cst.SimpleStatementLine, names: frozenset[str]) -> set[str]:
    """The names of ``names`` whose tensor ``statement`` may change in place."""
    found: set[str] = set()

    class Finder(cst.CSTVisitor):
        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            found.add(_root(node.target))

        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            if isinstance(node.target, (cst.Subscript, cst.Attribute)):
                found.add(_root(node.target))

        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if isinstance(func, cst.Attribute) and _in_place_name(func.attr.value):
                found.add(_root(func.value))
            positional = [a.value for a in node.args if a.keyword is None and not a.star]
            called = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(
                func, cst.Name) else ""
            inplace = any(a.keyword is not None and a.keyword.value == "inplace" for a in node.args)
            if positional and (_in_place_name(called) or inplace):
                found.add(_root(positional[0]))
            found.update(_root(a.value) for a in node.args if a.keyword is not None and a.keyword.value == "out")

    statement.visit(Finder())
    return {name for name in found if name in names}


__all__ = ["local_writes"]
