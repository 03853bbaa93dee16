"""Lists on the model that ``forward`` appends to: which uses compile, and their length threaded.

A list slot (``self.history``, kind ``list``: ``rewriter.state_table``) is not a parameter
of the threaded function: the function starts a fresh local list and returns the items
the call appended (``rewriter.state_threading``); the host, and the in-process model,
append those to the list they keep. The items the list held before the call are never
in the function, so a read of them (``self.history[-1]``, a loop over it, ``sum``) has
nothing to read and is refused. Its length is a number the call can know without its
items: the length when the call starts is a parameter, counted up at each append::

    self.history.append(h.mean().item())     # before
    if len(self.history) > 5:

    state_history.append(h.mean().item())    # after
    state_history_len = state_history_len + 1
    if state_history_len > 5:

Assumes: ``body`` is the flat, loop-free body with list slots already replaced by their
local names; ``len`` is the builtin (the pipeline resolved other bindings of it).
Guarantees: each list read by ``len()`` gets a fresh ``length`` parameter name
(``lengths``) whose final value is the list's length when the call ends; every
``len(<list>)`` reads it, so on every call, not only the first, it is the length eager
sees, and no compiled part reads the list itself (the count is a host int: a test on it is
a host condition, a use in tensor code a graph input). Any other use of a list slot but
``<list>.append(v)`` as a statement raises ``UnsupportedError`` at its line.
"""

from __future__ import annotations

import libcst as cst
from dycl.rewriter.context import RewriteContext
from dycl.rewriter.locations import comment_of, set_location
from dycl.rewriter.names import Namespace

_HINT = ("a list on self is compiled where forward() appends to it and reads its len() (its items grow with "
         "every call, and are kept outside the compiled code); keep what forward() reads of the items in a "
         "tensor buffer, a number attribute or a local list")


def thread_list_lengths(ctx: RewriteContext, body: list[cst.BaseStatement], lists: dict[str, str],
                        namespace: Namespace) -> tuple[list[cst.BaseStatement], dict[str, str]]:
    """``body`` with ``len()`` of each list slot rewritten (see the module note), and the length
    parameter of each list read that way (list parameter -> length parameter). ``lists``: the list
    slots' local names and their paths on the model (for errors)."""
    if not lists:
        return body, {}
    uses = _ListUses(frozenset(lists))
    for statement in body:
        statement.visit(uses)
    if uses.found is not None:
        statement, name = uses.found
        raise ctx.error(f"a read of the list {lists[name]} on the model, which forward() appends to",
                        statement, _HINT)
    lengths = {name: namespace.fresh(f"{name}_len") for name in lists if name in uses.measured}
    if not lengths:
        return body, {}
    return list(cst.Module(body=body).visit(_Lengths(lengths)).body), lengths


class _ListUses(cst.CSTVisitor):
    """The first use of a list slot other than ``<list>.append(v)`` (a statement) and ``len(<list>)``."""

    def __init__(self, lists: frozenset[str]) -> None:
        super().__init__()
        self.lists = lists
        self.allowed: set[int] = set()
        self.measured: set[str] = set()
        self.statement: cst.CSTNode | None = None
        self.found: tuple[cst.CSTNode, str] | None = None

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.statement = node

    def visit_If(self, node: cst.If) -> None:
        self.statement = node

    def visit_Expr(self, node: cst.Expr) -> None:
        if _appended(node) is not None:
            self.allowed.add(id(node.value.func.value))

    def visit_Call(self, node: cst.Call) -> None:
        measured = _measured(node, self.lists)
        if measured is not None:
            self.allowed.add(id(node.args[0].value))
            self.measured.add(measured)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.lists and id(node) not in self.allowed and self.found is None:
            self.found = (self.statement, node.value)


def _measured(node: cst.Call, lists: frozenset[str]) -> str | None:
    """The list slot ``node`` is ``len()`` of, else None."""
    if not (isinstance(node.func, cst.Name) and node.func.value == "len" and len(node.args) == 1):
        return None
    arg = node.args[0]
    if arg.keyword is not None or arg.star or not isinstance(arg.value, cst.Name) or arg.value.value not in lists:
        return None
    return arg.value.value


class _Lengths(cst.CSTTransformer):
    """``len(<list>)`` → ``<length>``; ``<list>.append(v)`` is followed by ``<length> = <length> + 1``."""

    def __init__(self, lengths: dict[str, str]) -> None:
        super().__init__()
        self.lengths = lengths

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        name = _measured(original, frozenset(self.lengths))
        return updated if name is None else cst.Name(self.lengths[name])

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
                                  ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        counts = [self.lengths[name] for name in map(_appended, updated.body) if name in self.lengths]
        if not counts:
            return updated
        added = [set_location(cst.parse_statement(f"{count} = {count} + 1\n"), comment_of(original))
                 for count in counts]
        return cst.FlattenSentinel([updated, *added])


def _appended(small: cst.BaseSmallStatement) -> str | None:
    """The name ``small`` (``<name>.append(v)``) appends to, else None."""
    call = small.value if isinstance(small, cst.Expr) else None
    if (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "append"
            and isinstance(call.func.value, cst.Name) and len(call.args) == 1):
        return call.func.value.value
    return None


__all__ = ["thread_list_lengths"]
