"""Write out the hooks of a submodule call whose ``forward`` is inlined.

``module(a, k=v)`` runs the module's forward pre-hooks, ``forward`` and its forward hooks
(``nn.Module.__call__``). When ``Inline`` inlines ``forward`` (it branches on data), the call
``T = self.gate(a, k=v)`` becomes, for a module with hooks,

    hook_arg = a                                   # each dynamic argument, evaluated once
    hook_arg_1, = run_pre_hooks(self.gate, (hook_arg,))    # if it has pre-hooks
    <self.gate.forward(hook_arg_1, k=v) inlined, each ``return v`` of it becoming>
    T = run_forward_hooks(self.gate, (hook_arg_1,), {'k': v}, v)      # if it has hooks

with the functions of ``rewriter.hook_runtime``, which the pass keeps as calls (traced). The
hooks run on each path's result before the paths join, so a ``forward`` that returns a tensor
on one path and a tuple on another keeps working.

Assumes: the call has no ``*args``/``**kwargs`` and its module's pre-hooks do not take
keyword arguments (``with_kwargs=True``); a pre-hook returns as many arguments as it got.
Guarantees: otherwise ``UnsupportedError`` naming the hook and the call's line; every new
statement carries the call's location comment; arguments with static values (a literal, a
submodule) are passed as they are, so ``forward`` is still specialised to them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst
import torch
from dycl.rewriter.context import RewriteContext
from dycl.rewriter.errors import SourceLocation, UnsupportedError
from dycl.rewriter.hook_runtime import run_forward_hooks, run_pre_hooks
from dycl.rewriter.hooks import forward_hooks
from dycl.rewriter.locations import comment_of, set_location


@dataclass(frozen=True)
class HookedCall:
    """A call of ``module`` (written ``term``) whose ``forward`` is inlined and which has hooks."""

    module: torch.nn.Module
    term: cst.BaseExpression


@dataclass(frozen=True)
class HookedLines:
    """What replaces a hooked call: ``prefix`` (arguments bound once, the pre-hooks), then
    ``forward`` (the call of the module's ``forward``, to inline), whose every result goes
    through ``wrap`` (the forward hooks; None when the module has none)."""

    prefix: list[cst.SimpleStatementLine]
    forward: cst.Call
    wrap: Callable[[cst.BaseExpression], cst.BaseExpression] | None
    consumed: frozenset[str] = frozenset()  # names only ``forward`` reads: its parameters may take them over


def hooked_call_lines(ctx: RewriteContext, hooked: HookedCall, call: cst.Call, stmt: cst.BaseStatement,
                      is_static: Callable[[cst.BaseExpression], bool]) -> HookedLines:
    """How ``call`` at ``stmt`` is written out (see the module note)."""
    _refuse_unsupported(hooked.module, call, ctx.locations.resolve(stmt))
    hooks = forward_hooks(hooked.module)
    lines: list[cst.BaseSmallStatement] = []
    args = [_once(arg.value, ctx, lines, is_static) for arg in call.args if arg.keyword is None]
    keywords = {arg.keyword.value: _once(arg.value, ctx, lines, is_static) for arg in call.args if arg.keyword}
    pre_hooked = any("pre-hook" in hook.kind for hook in hooks)
    if pre_hooked:
        # unpacked at once: no name holds the tuple, which would alias each argument (hcfg.aliasing)
        pre_hooks = _call(ctx, run_pre_hooks, hooked.term, _tuple(args))
        args = [cst.Name(ctx.namespace.fresh("hook_arg")) for _ in args]
        lines.append(_assign(_tuple(args), pre_hooks) if args else cst.Expr(pre_hooks))
    forward = cst.Call(cst.Attribute(hooked.term, cst.Name("forward")),
                       [cst.Arg(a) for a in args] + [cst.Arg(v, keyword=cst.Name(k)) for k, v in keywords.items()])
    wrap = None
    if any("pre-hook" not in hook.kind for hook in hooks):
        kwargs = cst.Dict([cst.DictElement(cst.SimpleString(repr(k)), v) for k, v in keywords.items()])
        hook_args = _tuple(args)

        def wrap(value: cst.BaseExpression) -> cst.BaseExpression:
            return _call(ctx, run_forward_hooks, hooked.term, hook_args, kwargs, value)

    prefix = [set_location(cst.SimpleStatementLine([small]), comment_of(stmt)) for small in lines]
    # without forward hooks the pre-hooks' results are read by forward only: an in-place update of its
    # parameter is not one of a second name (hcfg.aliasing)
    consumed = frozenset() if wrap is not None or not pre_hooked else frozenset(
        a.value for a in args if isinstance(a, cst.Name))
    return HookedLines(prefix, forward, wrap, consumed)


def _refuse_unsupported(module: torch.nn.Module, call: cst.Call, location: SourceLocation | None) -> None:
    if any(arg.star for arg in call.args):
        raise UnsupportedError("a call with *args or **kwargs of a submodule that has hooks and branches on data",
                               location, "pass the arguments one by one")
    for hook in forward_hooks(module):
        if "pre-hook" in hook.kind and id(hook.function) in _pre_hooks_with_kwargs(module):
            raise UnsupportedError(f"the {hook.kind} {hook.name} (with_kwargs=True) on a submodule whose forward "
                                   "branches on data", location, "register the pre-hook without with_kwargs")


def _pre_hooks_with_kwargs(module: torch.nn.Module) -> set[int]:
    return {id(hook) for key, hook in module._forward_pre_hooks.items() if key in module._forward_pre_hooks_with_kwargs}


def _once(value: cst.BaseExpression, ctx: RewriteContext, lines: list, is_static: Callable) -> cst.BaseExpression:
    """``value``, or a fresh name bound to it where evaluating it twice would repeat work."""
    if isinstance(value, cst.Name) or is_static(value):
        return value
    name = cst.Name(ctx.namespace.fresh("hook_arg"))
    lines.append(_assign(name, value))
    return name


def _call(ctx: RewriteContext, function: Callable, *args: cst.BaseExpression) -> cst.Call:
    term = ctx.globals.resolve(function.__name__, {function.__name__: function}).term
    return cst.Call(term, [cst.Arg(a) for a in args])


def _assign(target: cst.BaseAssignTargetExpression, value: cst.BaseExpression) -> cst.Assign:
    return cst.Assign([cst.AssignTarget(target)], value)


def _tuple(elements: list[cst.BaseExpression]) -> cst.BaseExpression:
    return cst.Tuple([cst.Element(e) for e in elements]) if elements else cst.parse_expression("()")


__all__ = ["HookedCall", "HookedLines", "hooked_call_lines"]
