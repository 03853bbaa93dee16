"""Fold a context variable bound around a block: ``set`` before a ``try``, ``reset`` in its ``finally``.

The form (transformers' ``@capture_outputs`` hands its dict of collected outputs to the
hooks of the submodules this way)::

    token = collector.set(collected)        # collector: a ContextVar, from the globals
    try:
        outputs = func(self, *args)         # BODY: collector.get() is `collected` here
    finally:
        collector.reset(token)

becomes ``BODY`` with every ``collector.get()`` in it replaced by ``collected``: a *scoped
binding*. During ``BODY`` the variable holds the object ``collected`` names, in this thread and
context, and after it the variable holds what it held before: so inside ``BODY`` a ``get()``
is that object, and outside it nothing this function did can be seen.

A *scoped variable* is a ``contextvars.ContextVar``, or an object wrapping one (its class
defines ``get``, ``set`` and ``reset``, and one of its attributes is a ``ContextVar``;
transformers' ``CompileableContextVar``, which behaves as the ``ContextVar`` it holds outside
``torch.compile``).

Folded only where all of this is proved from the source and the function's globals (else the
block is left as written, for ``rewriter.try_blocks`` and the flow to compile or refuse):

- the variable is a global (or closure cell) of the function, not a local;
- ``token`` is a plain name read nowhere but in the ``reset`` (the token cannot escape);
- ``collected`` is a plain name that ``BODY`` does not rebind (every ``get()`` in ``BODY`` is
  the object bound at the ``set``);
- the ``try`` has no handler and no ``else``, its ``finally`` is the ``reset`` alone, and
  ``BODY`` uses the variable only as ``get()`` (no other ``set``, no passing it on).

What a fold does not see: a read of the variable by code that ``BODY`` calls, which would
read the value the variable has outside the block. ``refuse_scoped_reads`` closes that, after
the rewrite, for a variable folded anywhere in it: a ``get()`` of it left in any function the
rewriter parsed (a callee's own read, not folded), and a forward hook of any module of the
model whose code names it (transformers' output-capturing hooks, traced with the module they
hang on), are refused (``SCOPED_READ``), naming the function or hook. A read by other code
traced into a graph (a library function the model calls that reads the variable directly) is
not seen: the assumption is that such a variable is read by hooks and by code dycl rewrites.

Assumes: the definition is annotated with location comments; ``try`` not yet spliced.
Guarantees: every folded block met the conditions above; no ``set``/``reset`` of a folded
variable remains in the function.
"""

from __future__ import annotations

import contextvars
import types
from collections.abc import Callable
from typing import Any

import libcst as cst
from dycl.rewriter.errors import SourceLocation, UnsupportedError
from dycl.rewriter.walk import all_names, bound_names, descendants

#: the construct named where a ``get()`` of a scoped variable is met outside a folded block
SCOPED_READ = "a read of a context variable whose binding dycl folded, outside the block that sets it"


def is_scoped_variable(value: Any) -> bool:
    """Whether ``value`` is a ``ContextVar`` or an object wrapping one (module note)."""
    if isinstance(value, contextvars.ContextVar):
        return True
    kind = type(value)
    if not all(callable(getattr(kind, name, None)) for name in ("get", "set", "reset")):
        return False
    state = getattr(value, "__dict__", None)
    return isinstance(state, dict) and any(isinstance(v, contextvars.ContextVar) for v in state.values())


def _dotted(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    return None


def _resolve(dotted: str, fn_globals: dict[str, Any], local: set[str]) -> Any:
    head, *rest = dotted.split(".")
    if head in local or head not in fn_globals:
        return None
    value = fn_globals[head]
    for name in rest:
        value = getattr(value, name, None)
    return value


def _method_call(node: cst.CSTNode, method: str) -> tuple[str, list[cst.Arg]] | None:
    """``(receiver, args)`` of ``<dotted receiver>.method(args)``, else None."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == method):
        return None
    receiver = _dotted(node.func.value)
    if receiver is None or any(a.star or a.keyword is not None for a in node.args):
        return None
    return receiver, list(node.args)


def _single_small(stmt: cst.BaseStatement) -> cst.BaseSmallStatement | None:
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        return stmt.body[0]
    return None


class _Gets(cst.CSTTransformer):
    """Replaces ``<receiver>.get()`` by ``value``; counts the receiver's other uses."""

    def __init__(self, receiver: str, value: str) -> None:
        super().__init__()
        self.receiver, self.value, self.other_uses = receiver, value, 0

    def _is_get(self, node: cst.Call) -> bool:
        got = _method_call(node, "get")
        return got is not None and got[0] == self.receiver and not got[1]

    def visit_Call(self, node: cst.Call) -> bool:
        return not self._is_get(node)  # the receiver inside a get() is no other use

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        return cst.Name(self.value) if self._is_get(original) else updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        if _dotted(original) == self.receiver:
            self.other_uses += 1
        return updated

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        if original.value == self.receiver:
            self.other_uses += 1
        return updated


class _Fold:
    """Folds the scoped bindings of one function (module note)."""

    def __init__(self, definition: cst.FunctionDef, fn_globals: dict[str, Any]) -> None:
        self.definition = definition
        self.fn_globals = fn_globals
        self.local = bound_names(definition)
        self.variables: list[Any] = []

    def block(self, stmts: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        out: list[cst.BaseStatement] = []
        i = 0
        while i < len(stmts):
            spliced = self._pair(stmts[i], stmts[i + 1]) if i + 1 < len(stmts) else None
            if spliced is not None:
                out.extend(spliced)
                i += 2
                continue
            out.append(stmts[i])
            i += 1
        return out

    def _pair(self, first: cst.BaseStatement, second: cst.BaseStatement) -> list[cst.BaseStatement] | None:
        setting = _single_small(first)
        if not (isinstance(second, cst.Try) and isinstance(setting, cst.Assign) and len(setting.targets) == 1):
            return None
        token, call = setting.targets[0].target, _method_call(setting.value, "set")
        if not isinstance(token, cst.Name) or call is None or len(call[1]) != 1:
            return None
        receiver, (value,) = call[0], call[1]
        if not isinstance(value.value, cst.Name) or not self._finally_resets(second, receiver, token.value):
            return None
        if not is_scoped_variable(_resolve(receiver, self.fn_globals, self.local)):
            return None
        if self._token_reads(token.value) != 1 or value.value.value in bound_names(second.body):
            return None
        gets = _Gets(receiver, value.value.value)
        body = [s.visit(gets) for s in second.body.body]
        if gets.other_uses:
            return None
        variable = _resolve(receiver, self.fn_globals, self.local)
        if not any(v is variable for v in self.variables):
            self.variables.append(variable)
        return body

    def _finally_resets(self, stmt: cst.Try, receiver: str, token: str) -> bool:
        if stmt.handlers or stmt.orelse is not None or stmt.finalbody is None:
            return False
        final = stmt.finalbody.body.body
        small = _single_small(final[0]) if len(final) == 1 else None
        call = _method_call(small.value, "reset") if isinstance(small, cst.Expr) else None
        return (call is not None and call[0] == receiver and len(call[1]) == 1
                and isinstance(call[1][0].value, cst.Name) and call[1][0].value.value == token)

    def _token_reads(self, token: str) -> int:
        """How many times ``token`` is read in the function (its assignment aside)."""
        return sum(1 for node in descendants(self.definition.body)
                   if isinstance(node, cst.Name) and node.value == token) - 1


class _Blocks(cst.CSTTransformer):
    def __init__(self, fold: _Fold) -> None:
        super().__init__()
        self.fold = fold

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        return updated.with_changes(body=self.fold.block(list(updated.body)))


def fold_scoped_bindings(definition: cst.FunctionDef, fn_globals: dict[str, Any]
                         ) -> tuple[cst.FunctionDef, tuple[Any, ...]]:
    """``definition`` with every scoped binding folded (module note), and the variables folded."""
    if not any(isinstance(node, cst.Try) for node in descendants(definition.body)):
        return definition, ()
    if not any(name in fn_globals for name in all_names(definition)):
        return definition, ()
    fold = _Fold(definition, fn_globals)
    folded = definition.visit(_Blocks(fold))
    return (folded, tuple(fold.variables)) if fold.variables else (definition, ())


def refuse_scoped_reads(folded: list[Any], functions: list[tuple[cst.FunctionDef, dict[str, Any]]],
                        hooks: list[types.FunctionType], where: Callable[[cst.CSTNode], SourceLocation | None]
                        ) -> None:
    """Raise ``UnsupportedError`` (``SCOPED_READ``) where a variable in ``folded`` is read outside
    its block: a ``get()`` left in one of ``functions`` (definition, globals), or a hook whose code
    names it (module note)."""
    if not folded:
        return
    for definition, fn_globals in functions:
        for node in descendants(definition.body):
            got = _method_call(node, "get")
            if got is not None and any(_resolve(got[0], fn_globals, set()) is v for v in folded):
                raise UnsupportedError(SCOPED_READ + f" ({got[0]}.get() in {definition.name.value})",
                                       where(_line_of(definition, node)), _HINT)
    for hook in hooks:
        if any(hook.__globals__.get(name) is v for name in _global_names(hook.__code__) for v in folded):
            raise UnsupportedError(SCOPED_READ + f" (the forward hook {hook.__qualname__} reads it)",
                                   SourceLocation(hook.__code__.co_filename, hook.__code__.co_firstlineno), _HINT)


_HINT = ("the hooks and functions that read it would see the value it has outside the block; remove the "
         "hooks (or the output capturing that installs them) before compiling")


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _line_of(definition: cst.FunctionDef, target: cst.CSTNode) -> cst.CSTNode:
    """The statement line of ``definition`` holding ``target`` (for its location)."""
    for node in descendants(definition.body):
        if isinstance(node, cst.SimpleStatementLine) and any(n is target for n in descendants(node)):
            return node
    return target


__all__ = ["SCOPED_READ", "fold_scoped_bindings", "is_scoped_variable", "refuse_scoped_reads"]
