"""The pass pipeline for one function body, and the rewriting of callees to inline."""

from __future__ import annotations

import types
from dataclasses import dataclass

import libcst as cst
import torch
from dycl.rewriter.check import reject_unsupported
from dycl.rewriter.constprop import ConstantPropagation
from dycl.rewriter.context import RewriteContext
from dycl.rewriter.errors import UnsupportedError
from dycl.rewriter.exits import Block, contains
from dycl.rewriter.flow import Env, StaticFlow, local_names
from dycl.rewriter.forward import resolve_method
from dycl.rewriter.inline import Callee, Inline, InlinedBody, is_user_code, user_function
from dycl.rewriter.normalize import Normalize
from dycl.rewriter.source import ParsedFunction, parse_function
from dycl.rewriter.state_writes import reject_state_writes
from dycl.rewriter.structure import Structure
from dycl.rewriter.substitute import rename
from dycl.rewriter.unroll import Unroll
from dycl.rewriter.values import ModuleIndex, Static, fingerprint, holds_container, is_literal
from dycl.rewriter.verify import verify
from dycl.rewriter.walk import descendants

PASSES = (
    ("normalize", "drop docstrings, splice `with torch.no_grad():` bodies"),
    ("unroll", "unroll for/while loops with static trip counts; break/continue become if/else"),
    ("inline", "inline helpers and submodules that still branch on data"),
    ("constprop", "substitute and fold static values; drop ifs with static tests"),
    ("structure", "elif and early returns become nested if/else"),
)


def run_passes(ctx: RewriteContext, parsed: ParsedFunction, definition: cst.FunctionDef, env: Env,
               inlined: bool) -> Block:
    """Rewrite ``definition`` (whose locals are already hygienic) under ``env``;
    ``inlined`` bodies get every ``return`` at the end of its path."""
    flow = StaticFlow(ctx, local_names(definition), parsed.globals)
    body: Block = list(definition.body.body)
    for name, _ in PASSES:
        if name == "normalize":
            body = Normalize(ctx, flow).run(body)
        elif name == "unroll":
            body = Unroll(ctx, flow).run(body, env.copy())
        elif name == "inline":
            body = Inline(ctx, flow, lambda callee, stmt: rewrite_callee(ctx, callee, stmt)).run(body, env.copy())
        elif name == "constprop":
            body = ConstantPropagation(ctx, flow).run(body, env.copy())
        elif name == "structure":
            parameters = frozenset(p.name.value for p in definition.params.params)
            body = Structure(inlined, ctx.namespace.fresh, parameters).run(body)
        ctx.record(name, parsed, body)
    verify(ctx, flow, body, env)
    return body


def parse_checked(ctx: RewriteContext, function) -> ParsedFunction:
    parsed = ctx.parsed.get(function)
    if parsed is None:
        parsed = parse_function(function, ctx.locations)
        reject_unsupported(ctx, parsed.definition)
        reject_state_writes(ctx, parsed.function, parsed.definition)
        ctx.parsed[function] = parsed
    return parsed


_BRANCHING = (cst.If, cst.For, cst.While, cst.IfExp, cst.BooleanOperation, cst.Try)


def _converts(node: cst.CSTNode) -> bool:
    """``t.item()``, ``t.tolist()``, ``t.numpy()``, ``int(t)``, ``float(t)``, ``bool(t)`` (syntactically):
    a Python value that may come from a tensor, which the HCFG builder moves to the host
    only in code it sees, so a callee containing one is inlined (hcfg.decisions)."""
    if not isinstance(node, cst.Call):
        return False
    if isinstance(node.func, cst.Attribute):
        return node.func.attr.value in ("item", "tolist", "numpy") and not node.args
    return isinstance(node.func, cst.Name) and node.func.value in ("int", "float", "bool")


def _syntax_facts(ctx: RewriteContext, function):
    """(parsed, calls, locals) when ``function`` has no control flow syntax, else None."""
    if function in ctx.syntax_facts:
        return ctx.syntax_facts[function]
    parsed = parse_checked(ctx, function)
    body = parsed.definition.body.body
    nodes = [n for stmt in body for n in descendants(stmt)]
    branching = any(isinstance(n, _BRANCHING) or _converts(n) for n in nodes)
    early_return = any(contains(stmt, (cst.Return,), into_loops=True) for stmt in body[:-1])
    facts = None
    if not branching and not early_return and not parsed.higher_order:
        facts = (parsed, [n for n in nodes if isinstance(n, cst.Call)], local_names(parsed.definition))
    ctx.syntax_facts[function] = facts
    return facts


def branch_free(ctx: RewriteContext, function, receiver: Static | None) -> bool:
    """A cheap proof that calling ``function`` never branches on data: no control
    flow syntax, and every call in it goes to library code or to user code that
    is itself branch-free. False means "maybe" (the callee is then rewritten)."""
    key = (function, id(receiver.value) if receiver is not None else None)
    if key in ctx.branch_free:
        return ctx.branch_free[key]
    ctx.branch_free[key] = False  # a cycle is not provably branch-free
    facts = _syntax_facts(ctx, function)
    result = facts is not None
    if result:
        parsed, calls, locals_ = facts
        env = Env()
        params = parsed.definition.params.params
        if receiver is not None and params:
            env.bind(params[0].name.value, receiver)
        flow = StaticFlow(ctx, locals_, parsed.globals)
        result = all(_call_is_branch_free(ctx, flow, env, call) for call in calls)
    ctx.branch_free[key] = result
    return result


def _call_is_branch_free(ctx: RewriteContext, flow: StaticFlow, env: Env, call: cst.Call) -> bool:
    func = flow.evaluate(call.func, env)
    if func is None:
        return not (isinstance(call.func, cst.Name) and call.func.value in flow.locals)
    target = func.value
    if isinstance(target, torch.nn.Sequential):
        return all(_module_is_branch_free(ctx, m, func.term) for m in target)
    if isinstance(target, torch.nn.Module):
        return _module_is_branch_free(ctx, target, func.term)
    if isinstance(target, types.MethodType) and isinstance(target.__self__, torch.nn.Module):
        owner, function = target.__self__, user_function(target.__func__)
        return not is_user_code(function) or branch_free(ctx, function, Static(owner, func.term))
    if isinstance(target, types.FunctionType):
        function = user_function(target)
        return not is_user_code(function) or branch_free(ctx, function, None)
    return True


def _module_is_branch_free(ctx: RewriteContext, module: torch.nn.Module, term: cst.BaseExpression) -> bool:
    """Whether calling ``module`` provably never branches on data; its forward is
    found as Python finds it (an instance attribute wins)."""
    try:
        resolved = resolve_method(module)
    except UnsupportedError:
        return not is_user_code(type(module))  # user code: "maybe", and inlining it reports the error
    function = user_function(resolved.function)
    return not is_user_code(function) or branch_free(ctx, function, Static(resolved.owner, term))


def _static_key(value) -> tuple:
    if is_literal(value) and not holds_container(value):  # a container's identity matters (aliasing)
        return ("literal", type(value).__name__, repr(value))
    return ("object", id(value))


def rewrite_callee(ctx: RewriteContext, callee: Callee, call_site: cst.BaseStatement) -> InlinedBody | None:
    """The callee's body specialised to its static arguments, or None when it
    has no data-dependent control flow (the call is then kept).

    Note: sharing one rewrite between instances. A body is rewritten with its
    receiver written as a placeholder name and cached under the receiver's
    ``fingerprint``; each call site substitutes its own receiver path. So a
    gate class used by 100 blocks is rewritten once, not 100 times.
    """
    receiver = callee.receiver
    if branch_free(ctx, callee.function, receiver):
        return None
    receiver_key = fingerprint(receiver.value, ctx.fingerprints) if receiver is not None else None
    key = (callee.function, receiver_key,
           tuple(sorted((n, _static_key(s.value)) for n, s in callee.static.items() if s is not receiver)),
           tuple(sorted(callee.dynamic)))
    if key not in ctx.callee_cache:
        ctx.callee_cache[key] = _rewrite_specialised(ctx, callee, call_site)
    cached = ctx.callee_cache[key]
    if cached is None or receiver is None:
        return cached
    inlined = cached.inlined
    return InlinedBody(inlined.body, inlined.params, inlined.assigned, {cached.placeholder: receiver.term})


def _rewrite_specialised(ctx: RewriteContext, callee: Callee, call_site: cst.BaseStatement):
    receiver = callee.receiver
    frame = (callee.function, id(receiver.value) if receiver is not None else None)
    if frame in ctx.call_stack:
        raise ctx.error(f"recursion ({callee.function.__qualname__} calls itself)", call_site,
                        "unroll the recursion by hand or bound it with a loop")
    parsed = parse_checked(ctx, callee.function)
    mapping = {name: ctx.namespace.fresh(name) for name in sorted(local_names(parsed.definition))}
    definition = rename(parsed.definition, mapping)
    env = Env()
    placeholder = None
    outer_index = ctx.index
    for name, static in callee.static.items():
        if static is receiver:
            placeholder = ctx.namespace.fresh("receiver")
            static = Static(receiver.value, cst.Name(placeholder))
            ctx.index = ModuleIndex(receiver.value, static.term, outer=outer_index)
            # passes write the receiver's submodules as terms on the placeholder
            # (``receiver.blocks[0]``); later passes must be able to evaluate them
            env.bind(placeholder, static)
        elif holds_container(static.value):  # the inlined call binds it to its parameter (Inline._bind_dynamic)
            static = Static(static.value, cst.Name(mapping[name]))
        env.bind(mapping[name], static)
    ctx.call_stack.append(frame)
    try:
        body = run_passes(ctx, parsed, definition, env, inlined=True)
    finally:
        ctx.call_stack.pop()
        ctx.index = outer_index
    if not parsed.higher_order and not any(contains(stmt, (cst.If,), into_loops=True) for stmt in body) and not any(
            _converts(n) for stmt in body for n in descendants(stmt)):
        return None
    params = {p: mapping[p] for p in (*callee.static, *callee.dynamic) if p in mapping}
    inlined = InlinedBody(body, params)
    return _WithPlaceholder(inlined, placeholder) if receiver is not None else inlined


@dataclass(frozen=True)
class _WithPlaceholder:
    """A cached callee body whose receiver is written as ``placeholder``."""

    inlined: InlinedBody
    placeholder: str
