"""Lists on the model that ``forward`` appends to: which uses compile, and how they are threaded.

A list slot (``self.history``, kind ``list``: ``rewriter.state_table``) is not a parameter
of the threaded function: the function starts a fresh local list and returns the items
the call appended (``rewriter.state_threading``); the host, and the in-process model,
append those to the list they keep. Two more parameters give what the call reads:

- its length, where forward() takes ``len()`` of it or tests its truth (``if self.history:``,
  ``not``, a conditional expression's test): the length when the call starts (kind ``length``),
  counted up at each append;
- its items, where forward() reads them (``self.history[-1]``, ``sum(self.history)``,
  ``max``/``min``/``sorted``/``any``/``all`` of it, ``v in self.history``): the items held
  when the call starts (kind ``prior``), passed as a ``collections.deque``, a container the
  host keeps and no compiled part takes (``hcfg.host_reads``), so what is read of them is
  host work per call; each read sees those items followed by the call's own::

    self.history.append(h.mean().item())     # before
    if len(self.history) > 5 and self.history[-2] > 0.5:

    state_history.append(h.mean().item())    # after
    state_history_len = state_history_len + 1
    if state_history_len > 5 and [*state_history_prior, *state_history][-2] > 0.5:

Assumes: ``body`` is the flat, loop-free body with list slots already replaced by their
local names; ``len``, ``sum``... are the builtins (the pipeline resolved other bindings).
Guarantees: every ``len(<list>)`` reads the length parameter, every read above a fresh list
of the items eager's list holds at that point, so on every call, not only the first, the
value is eager's. Any other use of a list slot but ``<list>.append(v)`` as a statement (a
name bound to it, which would see later appends; a loop over it, whose length grows with
every call) raises ``UnsupportedError`` at its line. A read of tensor items in tensor code
is refused where the graph would take them (``hcfg.variants``: no port carries the deque).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
from dycl.rewriter.context import RewriteContext
from dycl.rewriter.locations import comment_of, set_location
from dycl.rewriter.names import Namespace

_HINT = ("a list on self that forward() appends to is compiled where forward() reads its len(), an item "
         "(self.history[-1]), or sum/max/min/sorted/any/all of it, or tests `v in` it; keep other uses in "
         "a local list, a tensor buffer or a number attribute")
#: builtins that read a list's items once and keep no reference to it
_READERS = frozenset({"sum", "max", "min", "sorted", "any", "all"})


@dataclass(frozen=True)
class ListParameters:
    """The parameters added for the list slots (list parameter -> added parameter)."""

    lengths: dict[str, str]
    priors: dict[str, str]


def thread_lists(ctx: RewriteContext, body: list[cst.BaseStatement], lists: dict[str, str],
                 namespace: Namespace) -> tuple[list[cst.BaseStatement], ListParameters]:
    """``body`` with the reads of each list slot rewritten (see the module note), and the
    parameters they read. ``lists``: the list slots' local names and their paths on the model."""
    uses = _ListUses(frozenset(lists))
    for statement in body:
        statement.visit(uses)
    if uses.found is not None:
        statement, name = uses.found
        raise ctx.error(f"a read of the list {lists[name]} on the model, which forward() appends to",
                        statement, _HINT)
    added = ListParameters({name: namespace.fresh(f"{name}_len") for name in lists if name in uses.measured},
                           {name: namespace.fresh(f"{name}_prior") for name in lists if name in uses.read})
    if not added.lengths and not added.priors:
        return body, added
    return list(cst.Module(body=body).visit(_ListReads(added, uses.reads, uses.truths)).body), added


class _ListUses(cst.CSTVisitor):
    """The uses of the list slots: ``len()`` (``measured``), reads of their items (``read``, the
    names' nodes in ``reads``) and the first other use (``found``) but an append statement."""

    def __init__(self, lists: frozenset[str]) -> None:
        super().__init__()
        self.lists = lists
        self.allowed: set[int] = set()
        self.reads: set[int] = set()
        self.truths: set[int] = set()
        self.measured: set[str] = set()
        self.read: set[str] = set()
        self.statement: cst.CSTNode | None = None
        self.found: tuple[cst.CSTNode, str] | None = None

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.statement = node

    def visit_Expr(self, node: cst.Expr) -> None:
        if _appended(node) is not None:
            self.allowed.add(id(node.value.func.value))

    def _read(self, node: cst.BaseExpression) -> None:
        if isinstance(node, cst.Name) and node.value in self.lists:
            self.reads.add(id(node))
            self.read.add(node.value)

    def visit_Call(self, node: cst.Call) -> None:
        measured = _measured(node, self.lists)
        if measured is not None:
            self.allowed.add(id(node.args[0].value))
            self.measured.add(measured)
        elif (isinstance(node.func, cst.Name) and node.func.value in _READERS and len(node.args) == 1
              and node.args[0].keyword is None and not node.args[0].star):
            self._read(node.args[0].value)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        self._read(node.value)

    def _truth(self, node: cst.BaseExpression) -> None:
        """``node`` is tested for truth (``if self.history:``, ``not self.history``): its length decides."""
        if isinstance(node, cst.Name) and node.value in self.lists:
            self.truths.add(id(node))
            self.measured.add(node.value)
        elif isinstance(node, cst.BooleanOperation):  # the operands of an ``if`` test are tested for truth
            self._truth(node.left)
            self._truth(node.right)

    def visit_If(self, node: cst.If) -> None:
        self.statement = node
        self._truth(node.test)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._truth(node.test)

    def visit_UnaryOperation(self, node: cst.UnaryOperation) -> None:
        if isinstance(node.operator, cst.Not):
            self._truth(node.expression)

    def visit_ComparisonTarget(self, node: cst.ComparisonTarget) -> None:
        if isinstance(node.operator, (cst.In, cst.NotIn)):
            self._read(node.comparator)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.lists and id(node) not in self.allowed | self.reads | self.truths and self.found is None:
            self.found = (self.statement, node.value)


def _measured(node: cst.Call, lists: frozenset[str]) -> str | None:
    """The list slot ``node`` is ``len()`` of, else None."""
    if not (isinstance(node.func, cst.Name) and node.func.value == "len" and len(node.args) == 1):
        return None
    arg = node.args[0]
    if arg.keyword is not None or arg.star or not isinstance(arg.value, cst.Name) or arg.value.value not in lists:
        return None
    return arg.value.value


class _ListReads(cst.CSTTransformer):
    """``len(<list>)`` → ``<length>``; a test of its truth → ``(<length> > 0)``; a read of the
    items → ``[*<prior>, *<list>]``; and
    ``<list>.append(v)`` is followed by ``<length> = <length> + 1``."""

    def __init__(self, added: ListParameters, reads: set[int], truths: set[int]) -> None:
        super().__init__()
        self.added = added
        self.reads = reads
        self.truths = truths

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        if id(original) in self.truths:
            return cst.parse_expression(f"({self.added.lengths[original.value]} > 0)")
        if id(original) not in self.reads:
            return updated
        return cst.parse_expression(f"[*{self.added.priors[original.value]}, *{original.value}]")

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        name = _measured(original, frozenset(self.added.lengths))
        return updated if name is None else cst.Name(self.added.lengths[name])

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
                                  ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        counts = [self.added.lengths[name] for name in map(_appended, updated.body) if name in self.added.lengths]
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


__all__ = ["ListParameters", "thread_lists"]
