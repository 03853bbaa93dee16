"""Reject the constructs dycl cannot compile, before any rewriting."""

from __future__ import annotations

import libcst as cst
from dycl.rewriter.choice_lowering import lambda_of_one
from dycl.rewriter.context import RewriteContext
from dycl.rewriter.locations import COMPOUND

_NOT_SUPPORTED: dict[type, tuple[str, str]] = {
    cst.Try: ("a try statement", "move error handling out of forward()"),  # spliced first: rewriter.try_blocks
    cst.TryStar: ("a try/except* statement", "move error handling out of forward()"),
    cst.Global: ("a global statement", "pass the value in, or store it on the module in __init__"),
    cst.Nonlocal: ("a nonlocal statement", "pass the value in, or store it on the module in __init__"),
    cst.Yield: ("yield (a generator)", "return a list or a tuple instead"),
    cst.Await: ("await", "forward() must be a plain function"),
    cst.Lambda: ("a lambda", "use a def at module level or an nn.Module"),
    cst.FunctionDef: ("a nested function definition", "define the helper as a method or at module level"),
    cst.ClassDef: ("a class definition inside forward()", "define the class at module level"),
    # an import of a loaded module is lowered (rewriter.local_imports); another, refused where reached (verify)
    cst.Match: ("a match statement", "use if/elif"),
    cst.NamedExpr: ("an assignment expression (:=)", "assign on a line of its own"),  # hoisted: rewriter.walrus
}


#: builtins whose ``key=lambda t: ...`` (one plain parameter) ``rewriter.choices`` lowers
_KEYED = ("max", "min", "sorted")


class RejectUnsupported(cst.CSTVisitor):
    """Raises ``UnsupportedError`` at the first construct dycl cannot compile.

    Assumes: statements carry location comments (``annotate_locations``).
    Guarantees: if it returns, the function has none of the constructs in
    ``_NOT_SUPPORTED``, no ``self.attr = ...`` assignment, no
    ``exec``/``eval`` call, ``*args``/``**kwargs`` parameter or async loop.
    """

    def __init__(self, ctx: RewriteContext, definition: cst.FunctionDef, receiver_writes: bool = False) -> None:
        super().__init__()
        self.ctx = ctx
        self.root = definition
        params = definition.params.params
        # a method's writes to its receiver are checked (compiled or refused) by ``rewriter.state_slots``
        self.self_name = params[0].name.value if params and not receiver_writes else None
        self.statement: list[cst.CSTNode] = []
        self.key_lambdas: set[int] = set()  # max/min/sorted(seq, key=lambda t: ...): lowered by rewriter.choices

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.SimpleStatementLine, *COMPOUND)):
            self.statement.append(node)
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in _KEYED:
            self.key_lambdas |= {id(a.value) for a in node.args if a.keyword is not None and a.keyword.value == "key"
                                 and isinstance(a.value, cst.Lambda) and lambda_of_one(a.value)}
        if node is not self.root and type(node) in _NOT_SUPPORTED and id(node) not in self.key_lambdas:
            construct, hint = _NOT_SUPPORTED[type(node)]
            raise self._error(construct, hint)
        return super().on_visit(node)

    def on_leave(self, original: cst.CSTNode) -> None:
        if self.statement and self.statement[-1] is original:
            self.statement.pop()
        super().on_leave(original)

    def _error(self, construct: str, hint: str = ""):
        return self.ctx.error(construct, self.statement[-1] if self.statement else self.root, hint)

    # *args/**kwargs of an inlined callee are bound as a tuple and a dict (``Inline.bind_arguments``);
    # forward()'s own are refused in ``rewriter.rewrite``.

    def visit_For(self, node: cst.For) -> None:
        if node.asynchronous is not None:
            raise self._error("an async for loop")

    def visit_With(self, node: cst.With) -> None:
        if node.asynchronous is not None:
            raise self._error("an async with statement")

    def _check_target(self, target: cst.BaseExpression) -> None:
        base = target
        while isinstance(base, (cst.Attribute, cst.Subscript)):
            base = base.value
        if target is not base and isinstance(base, cst.Name) and base.value == self.self_name:
            raise self._error("an assignment to a model attribute (self.x = ...) inside forward()",
                              "keep per-call state in local variables and return it")

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._check_target(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._check_target(node.target)

    def visit_Call(self, node: cst.Call) -> None:
        # super() is resolved by rewriter.super_calls
        if isinstance(node.func, cst.Name) and node.func.value in ("exec", "eval", "locals", "globals", "vars"):
            raise self._error(f"a call of {node.func.value}()")


def reject_unsupported(ctx: RewriteContext, definition: cst.FunctionDef, receiver_writes: bool = False) -> None:
    """``receiver_writes``: the function is a method whose writes to ``self`` ``rewriter.state_slots`` checks."""
    definition.visit(RejectUnsupported(ctx, definition, receiver_writes))
