"""The pass pipeline for one function body, and the rewriting of callees to inline."""

from __future__ import annotations

import libcst as cst

from rewriter.check import reject_unsupported
from rewriter.constprop import ConstantPropagation
from rewriter.context import RewriteContext
from rewriter.exits import Block, contains
from rewriter.flow import Env, StaticFlow, local_names
from rewriter.inline import Callee, Inline, InlinedBody
from rewriter.normalize import Normalize
from rewriter.source import ParsedFunction, parse_function
from rewriter.structure import Structure
from rewriter.substitute import rename
from rewriter.unroll import Unroll
from rewriter.values import is_literal
from rewriter.verify import verify

PASSES = (
    ("normalize", "drop docstrings, splice `with torch.no_grad():` bodies"),
    ("unroll", "unroll for/while loops with static trip counts; break/continue become if/else"),
    ("inline", "inline helpers and submodules that still branch on data"),
    ("constprop", "substitute and fold static values; drop ifs with static tests"),
    ("structure", "elif and early returns become nested if/else"),
)


def run_passes(ctx: RewriteContext, parsed: ParsedFunction, definition: cst.FunctionDef, env: Env) -> Block:
    """Rewrite ``definition`` (whose locals are already hygienic) under ``env``."""
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
            body = Structure().run(body)
        flow.locals |= local_names(cst.Module(body=body))
        ctx.record(name, parsed, body)
    verify(ctx, flow, body, env)
    return body


def parse_checked(ctx: RewriteContext, function) -> ParsedFunction:
    parsed = ctx.parsed.get(function)
    if parsed is None:
        parsed = parse_function(function, ctx.locations)
        reject_unsupported(ctx, parsed.definition)
        ctx.parsed[function] = parsed
    return parsed


def _static_key(value) -> tuple:
    return ("literal", type(value).__name__, repr(value)) if is_literal(value) else ("object", id(value))


def rewrite_callee(ctx: RewriteContext, callee: Callee, call_site: cst.BaseStatement) -> InlinedBody | None:
    """The callee's body specialised to its static arguments, or None when it
    has no data-dependent control flow (the call is then kept)."""
    receiver_id = id(callee.receiver.value) if callee.receiver is not None else None
    key = (callee.function, receiver_id,
           tuple(sorted((n, _static_key(s.value)) for n, s in callee.static.items())),
           tuple(sorted(callee.dynamic)))
    if key in ctx.callee_cache:
        return ctx.callee_cache[key]
    frame = (callee.function, receiver_id)
    if frame in ctx.call_stack:
        raise ctx.error(f"recursion ({callee.function.__qualname__} calls itself)", call_site,
                        "unroll the recursion by hand or bound it with a loop")
    parsed = parse_checked(ctx, callee.function)
    mapping = {name: ctx.namespace.fresh(name) for name in sorted(local_names(parsed.definition))}
    definition = rename(parsed.definition, mapping)
    env = Env()
    for name, static in callee.static.items():
        env.bind(mapping[name], static)
    ctx.call_stack.append(frame)
    try:
        body = run_passes(ctx, parsed, definition, env)
    finally:
        ctx.call_stack.pop()
    has_branches = any(contains(stmt, (cst.If,), into_loops=True) for stmt in body)
    result = InlinedBody(body, {p: mapping[p] for p in (*callee.static, *callee.dynamic)}) if has_branches else None
    ctx.callee_cache[key] = result
    return result
