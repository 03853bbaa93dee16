"""Write out, at a call of a module, the hooks that ``nn.Module.__call__`` runs, as code to inline.

For a module whose hooks write state (``rewriter.hook_effects``: ``ctx.written_hooks``),
``T = self.fc(a, k=v)`` becomes what ``torch.nn.Module._call_impl`` does, one hook at a time:

    hook_arg = a                                           # each dynamic argument, evaluated once
    hook_result = pre(self.fc, (hook_arg,))                # per forward pre-hook
    hook_args = (hook_arg,) if hook_result is None else (
        hook_result if isinstance(hook_result, tuple) else (hook_result,))
    hook_arg_1, = hook_args
    hook_out = self.fc.forward(hook_arg_1, k=v)            # inlined or traced, without its hooks
    hook_result_1 = count(self.fc, (hook_arg_1,), hook_out)   # per forward hook (+ kwargs: with_kwargs)
    hook_out_1 = hook_out if hook_result_1 is None else hook_result_1
    T = hook_out_1

where ``pre`` and ``count`` are the hook functions (a fresh global name each, or
``<owner>.<method>`` for a method of a module of the model). The ``Inline`` pass then inlines the
hook calls like methods of ``self.fc``: their writes are module state (``rewriter.state_slots``).
``prescan_hooks`` records those slots before any pass runs, so that no read of them is folded.

Assumes: ``ctx.written_hooks`` holds only modules whose every hook ``hook_refusal`` admitted;
the call has no ``*args``/``**kwargs``. Guarantees: otherwise ``UnsupportedError`` at the call;
the hooks run in ``__call__``'s order on the same arguments and output.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst
import torch
from dycl.rewriter.attribute_updates import attribute_updates
from dycl.rewriter.context import RewriteContext
from dycl.rewriter.errors import UnsupportedError
from dycl.rewriter.hook_runtime import run_forward_hooks, run_pre_hooks
from dycl.rewriter.hooks import forward_hooks
from dycl.rewriter.locations import LocationTable, comment_of, set_location
from dycl.rewriter.source import parse_function
from dycl.rewriter.state_slots import CollectStateWrites, state_receiver
from dycl.rewriter.state_threading import MISSING, object_at
from dycl.rewriter.walk import bound_names


@dataclass(frozen=True)
class WrittenHooks:
    """A call of ``module`` (written ``term``) whose hooks are written out as code."""

    module: torch.nn.Module
    term: cst.BaseExpression


def written_hook_lines(ctx: RewriteContext, hooked: WrittenHooks, call: cst.Call, small: cst.BaseSmallStatement,
                       stmt: cst.BaseStatement, is_static: Callable[[cst.BaseExpression], bool],
                       term_of: Callable[[object], cst.BaseExpression | None]) -> list[cst.SimpleStatementLine]:
    """The statements replacing ``small`` (``T = call``, ``return call``, ``call``) at ``stmt``."""
    where = ctx.locations.resolve(stmt)
    if any(arg.star for arg in call.args):
        raise UnsupportedError("a call with *args or **kwargs of a module whose hooks write state", where,
                               "pass the arguments one by one")
    module, fresh = hooked.module, ctx.namespace.fresh
    lines: list[cst.BaseSmallStatement] = []
    args = [_once(arg.value, fresh, lines, is_static) for arg in call.args if arg.keyword is None]
    keywords = {arg.keyword.value: _once(arg.value, fresh, lines, is_static) for arg in call.args if arg.keyword}
    for key, function in module._forward_pre_hooks.items():
        if key in module._forward_pre_hooks_with_kwargs:
            raise UnsupportedError("a forward pre-hook with_kwargs=True on a module whose hooks write state", where,
                                   "register the pre-hook without with_kwargs")
        result = cst.Name(fresh("hook_result"))
        lines.append(_assign(result, cst.Call(_hook_term(ctx, function, term_of, where),
                                              [cst.Arg(hooked.term), cst.Arg(_tuple(args))])))
        packed = cst.Name(fresh("hook_args"))
        as_tuple = cst.IfExp(_call("isinstance", result, cst.Name("tuple")), result, _tuple([result]))
        lines.append(_assign(packed, cst.IfExp(_is_none(result), _tuple(args), as_tuple)))
        if args:
            args = [cst.Name(fresh("hook_arg")) for _ in args]
            lines.append(_assign(_tuple(args), packed))
    out = cst.Name(fresh("hook_out"))
    lines.append(_assign(out, cst.Call(cst.Attribute(hooked.term, cst.Name("forward")),
                                       [cst.Arg(a) for a in args] + [cst.Arg(v, keyword=cst.Name(k))
                                                                     for k, v in keywords.items()])))
    for key, function in module._forward_hooks.items():
        result = cst.Name(fresh("hook_result"))
        hook_args = [cst.Arg(hooked.term), cst.Arg(_tuple(args))]
        if key in module._forward_hooks_with_kwargs:
            hook_args.append(cst.Arg(cst.Dict([cst.DictElement(cst.SimpleString(repr(k)), v)
                                               for k, v in keywords.items()])))
        lines.append(_assign(result, cst.Call(_hook_term(ctx, function, term_of, where), [*hook_args, cst.Arg(out)])))
        new_out = cst.Name(fresh("hook_out"))
        lines.append(_assign(new_out, cst.IfExp(_is_none(result), out, result)))
        out = new_out
    lines.append(small.with_changes(value=out) if not isinstance(small, cst.Expr) else cst.Expr(out))
    return [set_location(cst.SimpleStatementLine([one]), comment_of(stmt)) for one in lines]


def _hook_term(ctx: RewriteContext, function: object, term_of: Callable[[object], cst.BaseExpression | None],
               where) -> cst.BaseExpression:
    """How the rewritten code names the hook ``function``: its owner's method, or a fresh global."""
    if isinstance(function, types.MethodType):
        owner = term_of(function.__self__)
        if owner is None:
            raise UnsupportedError(f"the hook {function.__qualname__}, a method of a module dycl cannot name", where)
        return cst.Attribute(owner, cst.Name(function.__func__.__name__))
    return ctx.globals.introduce("hook", function).term


def hook_definition(ctx: RewriteContext, function: types.FunctionType,
                    definition: cst.FunctionDef) -> cst.FunctionDef:
    """``definition`` of a written-out hook with its receiver's ``setattr``/``__dict__.update`` calls as
    assignments (``rewriter.attribute_updates``); any other function's as it is."""
    params = (*definition.params.posonly_params, *definition.params.params)
    return attribute_updates(definition, params[0].name.value) if is_written_hook(ctx, function) and params \
        else definition


def is_written_hook(ctx: RewriteContext, function: object) -> bool:
    """Whether ``function`` is a hook of a module whose hooks are written out (so always inlined)."""
    return bool(ctx.written_hooks) and any(
        id(module) in ctx.written_hooks and any(hook.target is function for hook in forward_hooks(module))
        for module in ctx.model.modules())


def prescan_hooks(ctx: RewriteContext) -> None:
    """Record (leniently) the state slots the written-out hooks write, before any pass folds a read."""
    seen: set[int] = set()
    for module in ctx.model.modules():
        if id(module) not in ctx.written_hooks:
            continue
        for hook in forward_hooks(module):
            function = hook.target
            if id(function) in seen or not isinstance(function, types.FunctionType):
                continue
            seen.add(id(function))
            definition = parse_function(function, LocationTable(), closures=True).definition
            definition = hook_definition(ctx, function, definition)
            receiver, owners = state_receiver(ctx, function, definition)
            if receiver is not None and owners:
                locals_ = frozenset(bound_names(definition)) - {receiver}
                definition.visit(CollectStateWrites(ctx, receiver, locals_, owners, ctx.state, lenient=True))


def refuse_traced_hooks(ctx: RewriteContext, body: list[cst.BaseStatement], receiver: str) -> None:
    """Raise where a call kept as a call (traced into a sub-DNN) would run a written-out hook: a
    module whose hooks write state, called inside the graph of another call, would run them once,
    while compiling. The calls of hooks (written out, or ``rewriter.hook_runtime``'s) are not
    looked into: a hook is assumed not to call modules."""
    if not ctx.written_hooks:
        return
    hook_names = {name for name, value in ctx.globals.objects.items()
                  if value is run_pre_hooks or value is run_forward_hooks
                  or (name in ctx.globals.introduced and is_written_hook(ctx, value))}
    finder = _TracedHooks(ctx, receiver, frozenset(hook_names))
    for statement in body:
        statement.visit(finder)
        if finder.found is not None:
            where, module, called = finder.found
            raise ctx.error(f"a call of {called}, compiled as one graph, inside which {module} runs a hook that "
                            "writes state (tracing would run it once, while compiling)", where,
                            "call that submodule directly from a forward dycl rewrites, or make the hook return "
                            "a value instead of storing it")


class _TracedHooks(cst.CSTVisitor):
    def __init__(self, ctx: RewriteContext, receiver: str, hook_names: frozenset[str]) -> None:
        super().__init__()
        self.ctx, self.receiver, self.hook_names = ctx, receiver, hook_names
        self.statement: cst.CSTNode | None = None
        self.found: tuple[cst.CSTNode | None, str, str] | None = None

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.statement = node

    def visit_If(self, node: cst.If) -> None:
        self.statement = node

    def visit_Call(self, node: cst.Call) -> None:
        if self.found is not None or (isinstance(node.func, cst.Name) and node.func.value in self.hook_names):
            return
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "forward":
            owner = self._object(func.value)
            if isinstance(owner, torch.nn.Module):  # module.forward(...): its own hooks do not run
                self._check(owner, skip_self=True, call=node)
        else:
            self._check(self._object(func), skip_self=False, call=node)
        for arg in node.args:
            self._check(self._object(arg.value), skip_self=False, call=node)

    def _check(self, value: object, skip_self: bool, call: cst.Call) -> None:
        value = getattr(value, "__self__", value)  # a bound method: its module
        values = list(value.values()) if isinstance(value, dict) else list(value) if isinstance(
            value, (list, tuple)) else [value]
        for item in values:
            if not isinstance(item, torch.nn.Module):
                continue
            for name, inner in item.named_modules(remove_duplicate=False):
                if id(inner) in self.ctx.written_hooks and not (skip_self and inner is item) and self.found is None:
                    what = f"submodule {name!r}" if name else type(inner).__name__
                    self.found = (self.statement, what, cst.Module([]).code_for_node(call.func))

    def _object(self, node: cst.BaseExpression) -> object:
        found = object_at(node, self.receiver, self.ctx.model)
        return None if found is MISSING else found


def _once(value: cst.BaseExpression, fresh: Callable[[str], str], lines: list, is_static) -> cst.BaseExpression:
    if isinstance(value, cst.Name) or is_static(value):
        return value
    name = cst.Name(fresh("hook_arg"))
    lines.append(_assign(name, value))
    return name


def _assign(target: cst.BaseAssignTargetExpression, value: cst.BaseExpression) -> cst.Assign:
    return cst.Assign([cst.AssignTarget(target)], value)


def _call(name: str, *args: cst.BaseExpression) -> cst.Call:
    return cst.Call(cst.Name(name), [cst.Arg(a) for a in args])


def _is_none(value: cst.BaseExpression) -> cst.Comparison:
    return cst.Comparison(value, [cst.ComparisonTarget(cst.Is(), cst.Name("None"))])


def _tuple(elements: list[cst.BaseExpression]) -> cst.BaseExpression:
    if not elements:
        return cst.parse_expression("()")
    return cst.Tuple([cst.Element(e, comma=cst.Comma()) if len(elements) == 1 else cst.Element(e) for e in elements])


__all__ = ["WrittenHooks", "hook_definition", "is_written_hook", "prescan_hooks", "refuse_traced_hooks",
           "written_hook_lines"]
