"""Desugar nested functions, lambdas, ``torch.cond`` and ``torch.map`` into plain code.

Users coming from ``torch.export`` write data-dependent branches as
``torch.cond(pred, true_fn, false_fn, operands)`` with the branches as nested
``def``s, lambdas, methods or module-level functions, loops over a leading dim as
``map(body, xs, *args)``, and helpers as nested functions called in ``forward``.
This pass runs on a parsed function before any other rewriting:

- ``T = cond(pred, t, f, [a, b])`` becomes ``if pred: T = t(a, b) else: T = f(a, b)``
  (operands that are not plain names are bound to fresh names first, once);
- ``T = map(f, xs, *args)`` becomes
  ``T = torch.stack([f(xs[i], *args) for i in range(xs.shape[0])])`` where ``f`` is
  a lambda or a nested function whose body is one ``return``; the comprehension is
  unrolled when the sub-DNN is exported, which ``dycl.backends.onnx_export`` refuses
  where the leading dim is symbolic;
- a call of a nested function or lambda defined in the function (and of one passed
  to ``cond``) is replaced by its body, inlined at the call site with fresh names
  for its parameters and locals; its free names are the enclosing function's, read
  at the call, as Python's late binding reads them. ``nonlocal`` writes therefore
  write the enclosing variable, as in Python (``rewriter.nested_functions``). A call
  nested in an expression is first hoisted into a fresh temporary (see the note on
  evaluation order in ``_Desugar.hoist``).

Assumes: ``definition`` is annotated with location comments.
Guarantees: every nested ``def``/lambda it removes was only ever called (or passed
to ``cond``/``map``) after its definition in the same block, never recursively, and
had only literal defaults; anything else (a nested function used as a value,
recursion, an early ``return`` inside a loop, a call inside ``and``/``or``/``x if c
else y``/a comprehension) raises ``UnsupportedError`` at its line. Nested
functions and lambdas it does not remove are refused later (``rewriter.check``).
"""

from __future__ import annotations

import builtins
import functools
import types
from typing import Any

import libcst as cst
from dycl.rewriter.locations import LocationTable, comment_of, set_location
from dycl.rewriter.nested_functions import Block, FunctionInliner, NestedFunction, Writer, writer_for
from dycl.rewriter.substitute import replace_names
from dycl.rewriter.walk import COMPREHENSIONS, bound_names, descendants, map_children


@functools.lru_cache(maxsize=1)
def _higher_order_ops() -> tuple[frozenset[int], frozenset[int]]:
    """The ids of the ``cond`` and ``map`` objects torch exposes under their several names."""
    conds: list[Any] = []
    maps: list[Any] = []
    import torch
    conds.append(getattr(torch, "cond", None))
    for module, name, into in (("torch._higher_order_ops.cond", "cond", conds),
                               ("torch._higher_order_ops.map", "map", maps),
                               ("functorch.experimental.control_flow", "cond", conds),
                               ("functorch.experimental.control_flow", "map", maps)):
        try:
            imported = __import__(module, fromlist=[name])
        except Exception:  # noqa: BLE001,S112 - an optional, private module of torch
            continue
        into.append(getattr(imported, name, None))
    return (frozenset(id(c) for c in conds if c is not None), frozenset(id(m) for m in maps if m is not None))


class _Desugar(FunctionInliner):
    def __init__(self, definition: cst.FunctionDef, fn_globals: dict[str, Any], locations: LocationTable) -> None:
        super().__init__(definition, locations)
        self.globals = fn_globals
        self.locals = bound_names(definition) | {n.name.value for n in descendants(definition)
                                                 if isinstance(n, cst.FunctionDef)}
        self.stack: list[str] = []
        self.removed: set[str] = set()

    def kind(self, func: cst.BaseExpression, functions: dict[str, NestedFunction]) -> str | None:
        """"local", "lambda", "cond", "map" or None for a call's ``func``."""
        if isinstance(func, cst.Lambda):
            return "lambda"
        if isinstance(func, cst.Name) and func.value in functions:
            return "local"
        value = self.static(func)
        if value is None:
            return None
        conds, maps = _higher_order_ops()
        return "cond" if id(value) in conds else "map" if id(value) in maps else None

    def static(self, node: cst.BaseExpression) -> Any:
        """A global name or a chain of module attributes (``torch.cond``), else None."""
        if isinstance(node, cst.Name):
            if node.value in self.locals:
                return None
            if node.value in self.globals:
                return self.globals[node.value]
            return getattr(builtins, node.value, None)
        if isinstance(node, cst.Attribute):
            base = self.static(node.value)
            if isinstance(base, types.ModuleType):
                return getattr(base, node.attr.value, None)
        return None

    # -- functions and blocks --------------------------------------------------------------------

    def function(self, definition: cst.FunctionDef, functions: dict[str, NestedFunction]) -> cst.FunctionDef:
        body = self.block(list(definition.body.body), dict(functions))
        return definition.with_changes(body=definition.body.with_changes(body=body))

    def refuse_leftovers(self, definition: cst.FunctionDef) -> None:
        """A removed nested function still named somewhere was used outside the block
        that defines it (``def f`` inside an ``if``, called after it)."""
        for stmt in descendants(definition.body):
            if not isinstance(stmt, cst.SimpleStatementLine | cst.BaseCompoundStatement):
                continue
            heads = [stmt] if isinstance(stmt, cst.SimpleStatementLine) else [
                getattr(stmt, field) for field in ("test", "iter") if getattr(stmt, field, None) is not None]
            for head in heads:
                for name in descendants(head, stop=(cst.Attribute,)):
                    if isinstance(name, cst.Name) and name.value in self.removed:
                        raise self.error(f"the nested function {name.value} used outside the block that defines it",
                                         stmt, "define it at the top of forward()")

    def block(self, stmts: Block, functions: dict[str, NestedFunction]) -> Block:
        """Desugar ``stmts``; ``functions`` are the nested functions visible there.

        Note: hygiene. A nested function's own body is desugared with none of the
        enclosing function's nested functions visible: inlining ``g`` (which reads the
        enclosing ``x``) into a sibling ``f(x)`` would make ``g`` read ``f``'s ``x``. The
        call of ``g`` stays in ``f``'s body and is inlined where ``f`` is, in the scope
        that defines both."""
        out: Block = []
        for stmt in stmts:
            self.current = stmt
            defined = self.definition(stmt, functions)
            if defined is not None:
                functions[defined.name] = defined
                self.removed.add(defined.name)
                continue
            out += self.statement(stmt, functions)
        return out

    def definition(self, stmt: cst.BaseStatement, functions: dict[str, NestedFunction]) -> NestedFunction | None:
        """The nested function ``stmt`` defines (its own nested functions desugared), if any."""
        if isinstance(stmt, cst.FunctionDef):
            if stmt.decorators or stmt.asynchronous is not None:
                raise self.error("a decorated or async nested function", stmt, "define it at module level")
            self.check_parameters(stmt.params, stmt)
            inner = self.function(stmt, {})  # see the note on hygiene in ``block``
            return NestedFunction(stmt.name.value, stmt.params, list(inner.body.body), stmt)
        if (isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Assign)
                and isinstance(stmt.body[0].value, cst.Lambda) and len(stmt.body[0].targets) == 1
                and isinstance(stmt.body[0].targets[0].target, cst.Name)):
            value = stmt.body[0].value
            self.check_parameters(value.params, stmt)
            return NestedFunction(stmt.body[0].targets[0].target.value, value.params, value.body, stmt)
        return None

    def statement(self, stmt: cst.BaseStatement, functions: dict[str, NestedFunction]) -> Block:
        if isinstance(stmt, cst.If):
            hoisted, test = self.hoist(stmt.test, stmt, functions)
            body = stmt.body.with_changes(body=self.block(list(stmt.body.body), dict(functions)))
            orelse = stmt.orelse
            if isinstance(orelse, cst.If):
                self.refuse_calls(orelse.test, orelse, functions, "a call in an elif test")
                orelse = self.statement(orelse, dict(functions))[0]
            elif isinstance(orelse, cst.Else):
                orelse = orelse.with_changes(body=orelse.body.with_changes(
                    body=self.block(list(orelse.body.body), dict(functions))))
            return hoisted + [stmt.with_changes(test=test, body=body, orelse=orelse)]
        if isinstance(stmt, (cst.For, cst.While, cst.With)):
            if isinstance(stmt, cst.While):
                self.refuse_calls(stmt.test, stmt, functions, "a call in a while test")
                hoisted = []
            elif isinstance(stmt, cst.For):
                hoisted, iterable = self.hoist(stmt.iter, stmt, functions)
                stmt = stmt.with_changes(iter=iterable)
            else:
                hoisted, items = [], []
                for item in stmt.items:
                    more, value = self.hoist(item.item, stmt, functions)
                    hoisted += more
                    items.append(item.with_changes(item=value))
                stmt = stmt.with_changes(items=items)
            body = stmt.body.with_changes(body=self.block(list(stmt.body.body), dict(functions)))
            orelse = getattr(stmt, "orelse", None)
            if orelse is not None:
                orelse = orelse.with_changes(body=orelse.body.with_changes(
                    body=self.block(list(orelse.body.body), dict(functions))))
                return hoisted + [stmt.with_changes(body=body, orelse=orelse)]
            return hoisted + [stmt.with_changes(body=body)]
        if not isinstance(stmt, cst.SimpleStatementLine):
            return [stmt]
        small = stmt.body[0]
        self.refuse_rebinding(small, stmt, functions)
        value = getattr(small, "value", None)
        if isinstance(small, (cst.Assign, cst.Return, cst.Expr)) and isinstance(value, cst.Call) and self.kind(
                value.func, functions) is not None:
            hoisted, call = self.hoist_arguments(value, stmt, functions)
            return hoisted + self.expand(call, writer_for(small), stmt, functions)
        hoisted, new_small = self.hoist(small, stmt, functions)
        return hoisted + [stmt.with_changes(body=[new_small])]

    def refuse_rebinding(self, small: cst.BaseSmallStatement, stmt: cst.CSTNode,
                         functions: dict[str, NestedFunction]) -> None:
        for current in descendants(small, stop=(cst.Lambda, *COMPREHENSIONS)):
            if isinstance(current, (cst.AssignTarget, cst.AugAssign)):
                names = {n.value for n in descendants(current.target) if isinstance(n, cst.Name)}
                if names & functions.keys():
                    raise self.error("an assignment to the name of a nested function", stmt,
                                     "give the value another name")

    def refuse_calls(self, node: cst.CSTNode, stmt: cst.CSTNode, functions: dict[str, NestedFunction],
                     construct: str) -> None:
        for current in descendants(node):
            if isinstance(current, cst.Call) and self.kind(current.func, functions) is not None:
                raise self.error(f"{construct} of a nested function, lambda, torch.cond or map", stmt,
                                 "call it on a line of its own before")
            if isinstance(current, cst.Name) and current.value in functions:
                raise self.error(f"the nested function {current.value} used as a value", stmt,
                                 "dycl inlines nested functions where they are called")

    # -- hoisting calls out of expressions ---------------------------------------------------------

    def hoist(self, node: cst.CSTNode, stmt: cst.CSTNode, functions: dict[str, NestedFunction],
              written: set[str] | None = None) -> tuple[Block, cst.CSTNode]:
        """Move every call of a nested function, lambda, cond or map in ``node`` into a fresh
        temporary computed before ``stmt``; refuse any other use of a nested function.

        Note: evaluation order. What stays in ``node`` is evaluated after every hoisted
        body, though Python may evaluate some of it first (``x + f()``): where a hoisted
        function rebinds a name (``nonlocal``) that the rest reads, that is refused.
        ``written`` collects those names for a caller that checks a larger expression."""
        checked_here = written is None
        written = set() if written is None else written
        hoisted: Block = []

        def visit(current: cst.CSTNode) -> cst.CSTNode:
            if isinstance(current, (cst.BooleanOperation, cst.IfExp, cst.Lambda, *COMPREHENSIONS)):
                self.refuse_calls(current, stmt, functions, "a conditionally evaluated call (and/or/if-else/"
                                  "lambda/comprehension)")
                return current
            if isinstance(current, cst.Call) and self.kind(current.func, functions) is not None:
                more, call = self.hoist_arguments(current, stmt, functions)
                hoisted.extend(more)
                written.update(self.rebinds(call, functions))
                temp = self.fresh("out")
                target = cst.Assign([cst.AssignTarget(cst.Name(temp))], call)
                hoisted.extend(self.expand(call, writer_for(target), stmt, functions))
                return cst.Name(temp)
            if isinstance(current, cst.Name) and current.value in functions:
                raise self.error(f"the nested function {current.value} used as a value", stmt,
                                 "dycl inlines nested functions where they are called; call it directly")
            return map_children(current, visit)

        new = visit(node)
        if checked_here:
            self.refuse_reordering(new, written, stmt)
        return hoisted, new

    def rebinds(self, call: cst.Call, functions: dict[str, NestedFunction]) -> set[str]:
        """The enclosing names the nested functions ``call`` runs declare ``nonlocal``."""
        names = [a.value.value for a in call.args if isinstance(a.value, cst.Name)] + (
            [call.func.value] if isinstance(call.func, cst.Name) else [])
        return {n.name.value for name in names if name in functions and not functions[name].is_lambda
                for stmt in functions[name].body for node in descendants(stmt) if isinstance(node, cst.Nonlocal)
                for n in node.names}

    def refuse_reordering(self, node: cst.CSTNode, written: set[str], stmt: cst.CSTNode) -> None:
        read = {n.value for n in descendants(node) if isinstance(n, cst.Name)} & written
        if read:
            raise self.error(f"a nested function that rebinds {', '.join(sorted(read))} (nonlocal), called in an "
                             "expression that also reads it", stmt, "call the function on a line of its own")

    def hoist_arguments(self, call: cst.Call, stmt: cst.CSTNode, functions: dict[str, NestedFunction]
                        ) -> tuple[Block, cst.Call]:
        kind = self.kind(call.func, functions)
        # the function arguments of cond (true_fn, false_fn) and map (f) are inlined, not evaluated
        positions, keywords = {"cond": ({1, 2}, {"true_fn", "false_fn"}), "map": ({0}, {"f"})}.get(kind, (set(), set()))
        hoisted: Block = []
        args = []
        written: set[str] = set()
        for position, arg in enumerate(call.args):
            if (position in positions if arg.keyword is None else arg.keyword.value in keywords):
                args.append(arg)
                continue
            more, value = self.hoist(arg.value, stmt, functions, written)
            hoisted += more
            args.append(arg.with_changes(value=value))
        self.refuse_reordering(cst.Tuple([cst.Element(a.value) for a in args]), written, stmt)
        return hoisted, call.with_changes(args=args)

    # -- expanding one call ------------------------------------------------------------------------

    def expand(self, call: cst.Call, write: Writer, stmt: cst.CSTNode, functions: dict[str, NestedFunction]) -> Block:
        kind = self.kind(call.func, functions)
        if kind == "cond":
            return self.cond(call, write, stmt, functions)
        if kind == "map":
            return [self.line(write(self.map(call, stmt, functions)), stmt)]
        function = functions[call.func.value] if kind == "local" else NestedFunction(
            "<lambda>", call.func.params, call.func.body, stmt)
        name = function.name
        if name in self.stack:
            raise self.error(f"recursion (the nested function {name} calls itself)", stmt,
                             "write the recursion as a loop")
        self.stack.append(name)
        try:
            expanded = self.inline(function, call, write, stmt)
            return self.block(expanded, dict(functions))
        finally:
            self.stack.pop()

    def cond(self, call: cst.Call, write: Writer, stmt: cst.CSTNode, functions: dict[str, NestedFunction]) -> Block:
        args = _arguments(call, ("pred", "true_fn", "false_fn", "operands"))
        if args is None or not {"pred", "true_fn", "false_fn"} <= args.keys():
            raise self.error("torch.cond called with arguments other than (pred, true_fn, false_fn, operands)", stmt)
        operands = args.get("operands", cst.Tuple([]))
        if not isinstance(operands, (cst.List, cst.Tuple)) or any(
                isinstance(e, cst.StarredElement) for e in operands.elements):
            raise self.error("torch.cond whose operands are not a list or tuple written out", stmt,
                             "write the operands as [a, b, ...]")
        prologue: Block = []
        values = []
        for element in operands.elements:
            value = element.value
            if not isinstance(value, cst.Name):
                temp = self.fresh("operand")
                prologue.append(self.line(cst.Assign([cst.AssignTarget(cst.Name(temp))], value), stmt))
                value = cst.Name(temp)
            values.append(cst.Arg(value))
        branches = []
        for key in ("true_fn", "false_fn"):
            branch = cst.Call(args[key], values)
            branches.append(self.statement(self.line(_with_value(write, branch), stmt), dict(functions)))
        test = args["pred"]
        orelse = cst.Else(cst.IndentedBlock(branches[1]))
        branch_if = set_location(cst.If(test, cst.IndentedBlock(branches[0]), orelse), comment_of(stmt))
        return self.block(prologue, functions) + [branch_if]

    def map(self, call: cst.Call, stmt: cst.CSTNode, functions: dict[str, NestedFunction]) -> cst.BaseExpression:
        if any(a.keyword is not None or a.star for a in call.args) or len(call.args) < 2:
            raise self.error("map called with arguments other than (f, xs, *args)", stmt)
        torch_name = next((name for name, value in self.globals.items()
                           if getattr(value, "__name__", None) == "torch" and isinstance(value, types.ModuleType)
                           and name not in self.locals), None)
        if torch_name is None:
            raise self.error("map in a module that does not import torch", stmt, "import torch")
        func, xs, *rest = [a.value for a in call.args]
        if not isinstance(xs, cst.Name):
            raise self.error("map over an expression", stmt, "assign the mapped tensor to a name first")
        index = self.fresh("i")
        row = cst.Subscript(xs, [cst.SubscriptElement(cst.Index(cst.Name(index)))])
        body = self.expression(func, [row, *rest], stmt, functions)
        shape = cst.Subscript(cst.Attribute(xs, cst.Name("shape")), [cst.SubscriptElement(cst.Index(cst.Integer("0")))])
        loop = cst.CompFor(cst.Name(index), cst.Call(cst.Name("range"), [cst.Arg(shape)]))
        stack = cst.Attribute(cst.Name(torch_name), cst.Name("stack"))
        return cst.Call(stack, [cst.Arg(cst.ListComp(body, loop))])

    def expression(self, func: cst.BaseExpression, args: list[cst.BaseExpression], stmt: cst.CSTNode,
                   functions: dict[str, NestedFunction]) -> cst.BaseExpression:
        """The body of ``func`` (a lambda, or a nested function that only returns one
        expression) with its parameters replaced by ``args`` (pure expressions)."""
        if isinstance(func, cst.Lambda):
            function = NestedFunction("<lambda>", func.params, func.body, stmt)
        elif isinstance(func, cst.Name) and func.value in functions:
            function = functions[func.value]
        else:
            raise self.error("map of a function that is not a lambda or a nested function", stmt,
                             "define the mapped function with def inside forward()")
        body = function.body
        if not function.is_lambda:
            if not (len(body) == 1 and isinstance(body[0], cst.SimpleStatementLine)
                    and isinstance(body[0].body[0], cst.Return) and body[0].body[0].value is not None):
                raise self.error("map of a function with more than one statement", function.where,
                                 "write the mapped function as a single return expression")
            body = body[0].body[0].value
        bound = self.bind(function, [cst.Arg(a) for a in args], stmt)
        if any(isinstance(n, cst.Call) and self.kind(n.func, functions) is not None for n in descendants(body)):
            raise self.error("map of a function that calls a nested function, lambda or cond", function.where)
        return replace_names(body, lambda name: bound.get(name))

def _with_value(write: Writer, value: cst.BaseExpression) -> cst.BaseSmallStatement:
    written = write(value)
    return written if written is not None else cst.Expr(value)


def _arguments(call: cst.Call, names: tuple[str, ...]) -> dict[str, cst.BaseExpression] | None:
    out: dict[str, cst.BaseExpression] = {}
    for position, arg in enumerate(call.args):
        if arg.star:
            return None
        key = arg.keyword.value if arg.keyword is not None else (names[position] if position < len(names) else None)
        if key is None or key not in names or key in out:
            return None
        out[key] = arg.value
    return out


def calls_higher_order(definition: cst.FunctionDef, fn_globals: dict[str, Any]) -> bool:
    """Whether ``definition`` calls ``torch.cond`` or ``map`` (see ``_higher_order_ops``)."""
    desugar = _Desugar(definition, fn_globals, LocationTable())
    return any(isinstance(n, cst.Call) and desugar.kind(n.func, {}) in ("cond", "map")
               for n in descendants(definition.body))


def desugar_higher_order(definition: cst.FunctionDef, fn_globals: dict[str, Any],
                         locations: LocationTable) -> cst.FunctionDef:
    """``definition`` with its nested functions, lambdas, ``cond`` and ``map`` calls
    desugared (see the module note); unchanged when it has none."""
    desugar = _Desugar(definition, fn_globals, locations)
    if not any(isinstance(n, (cst.FunctionDef, cst.Lambda)) or isinstance(n, cst.Call) and desugar.kind(n.func, {})
               for n in descendants(definition.body)):
        return definition
    result = desugar.function(definition, {})
    desugar.refuse_leftovers(result)
    return result


__all__ = ["calls_higher_order", "desugar_higher_order"]
