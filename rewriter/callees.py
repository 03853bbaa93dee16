"""Rewriting the callees that ``Inline`` splices in, and proving the others branch-free.

A call of user code is kept when ``branch_free`` proves that the callee never
branches on data (no control flow syntax, and every call in it goes to
library code or to user code that is itself branch-free); otherwise
``rewrite_callee`` runs the pipeline on the callee's body specialised to the
call's static arguments. Every table this module fills is one of
``context.RewriteCaches``.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst
import torch
from dycl.rewriter.check import reject_unsupported
from dycl.rewriter.context import RewriteContext
from dycl.rewriter.deferred_refusals import DeferredRefusal
from dycl.rewriter.errors import UnsupportedError
from dycl.rewriter.exits import Block, contains
from dycl.rewriter.flow import Env, StaticFlow
from dycl.rewriter.forward import resolve_method
from dycl.rewriter.forwarding import specialise
from dycl.rewriter.generators import generator_as_list
from dycl.rewriter.inline import Callee, InlinedBody, call_method, explicit_receiver, is_user_code, user_function
from dycl.rewriter.source import ParsedFunction, parse_function
from dycl.rewriter.state_slots import collect_state_writes, state_receiver
from dycl.rewriter.substitute import rename
from dycl.rewriter.super_calls import is_super_call
from dycl.rewriter.values import ModuleIndex, Static, fingerprint, holds_container, is_literal
from dycl.rewriter.walk import all_names, bound_names, descendants
from dycl.rewriter.written_hooks import hook_definition, is_written_hook

#: A callee specialised to a call: (function, receiver fingerprint, static
#: arguments by name, dynamic parameter names).
CalleeKey = tuple[types.FunctionType, tuple | None, tuple[tuple[str, tuple], ...], tuple[str, ...]]
#: Runs the pipeline on a callee: (parsed, renamed definition, entry facts, module index) -> body.
RunBody = Callable[[ParsedFunction, cst.FunctionDef, Env, ModuleIndex, dict[str, tuple[int | None, ...]]], Block]


@dataclass(frozen=True)
class SyntaxFacts:
    """A user function whose source has no control flow syntax: its calls and local names."""

    parsed: ParsedFunction
    calls: list[cst.Call]
    locals: set[str]


@dataclass(frozen=True)
class WithPlaceholder:
    """A cached callee body whose receiver is written as ``placeholder``."""

    inlined: InlinedBody
    placeholder: str


CachedCallee = InlinedBody | WithPlaceholder


def _generator(function: types.FunctionType) -> bool:
    return bool(function.__code__.co_flags & inspect.CO_GENERATOR)


def parse_checked(ctx: RewriteContext, function: types.FunctionType) -> ParsedFunction:
    """``function`` parsed, with its unsupported constructs and state writes refused (once)."""
    parsed = ctx.caches.parsed.get(function)
    if parsed is None:
        parsed = parse_function(function, ctx.locations, closures=True, followed=ctx.followed)
        if _generator(function):  # a generator helper: rewriter.generators
            parsed = dataclasses.replace(parsed, definition=generator_as_list(parsed.definition, ctx.locations))
        parsed = dataclasses.replace(parsed, definition=hook_definition(ctx, function, parsed.definition))
        reject_unsupported(ctx, parsed.definition, state_receiver(ctx, function, parsed.definition)[0] is not None)
        definition, markers = collect_state_writes(ctx, parsed.function, parsed.definition)
        if markers:
            parsed = dataclasses.replace(parsed, definition=definition, imports={**parsed.imports, **markers})
        ctx.caches.parsed[function] = parsed
    return parsed


_EMPTY = cst.Module([])

#: How deep a function may call itself (each level with other static arguments).
MAX_RECURSION = 64

_BRANCHING = (cst.If, cst.For, cst.While, cst.IfExp, cst.BooleanOperation, cst.Try)


def converts(node: cst.CSTNode) -> bool:
    """``t.item()``, ``t.tolist()``, ``t.numpy()``, ``int(t)``, ``float(t)``, ``bool(t)`` (syntactically):
    a Python value that may come from a tensor, which the HCFG builder moves to the host
    only in code it sees, so a callee containing one is inlined (hcfg.decisions). So is
    ``max(a, b)``/``min`` of two or more items: it compares them (``bool(b > a)``), a choice
    ``rewriter.choices`` moves to the host."""
    if not isinstance(node, cst.Call):
        return False
    if isinstance(node.func, cst.Attribute):
        return node.func.attr.value in ("item", "tolist", "numpy") and not node.args
    if isinstance(node.func, cst.Name) and node.func.value in ("max", "min"):
        return len(node.args) > 1
    return isinstance(node.func, cst.Name) and node.func.value in ("int", "float", "bool")


#: what code asks to learn whether the exporter's tracer runs it (``torch.jit.is_tracing()``,
#: ``torch.onnx.is_in_onnx_export()``, ``torch._C._get_tracing_state()``): the rewrite folds the
#: question to eager's answer (``rewriter.mode_predicates``), the trace of the code as it is would not
TRACER_QUESTIONS = frozenset({"is_tracing", "is_in_onnx_export", "_get_tracing_state", "_is_tracing"})


def asks_the_tracer(definition: cst.FunctionDef) -> bool:
    """Whether ``definition`` calls one of ``TRACER_QUESTIONS`` (by its last name): such a callee is
    inlined, folded, even where its rewrite has no branch left, since the call kept would be traced
    with the tracer's answer (``dycl.export.tracer_state`` refuses any other such question)."""
    for node in descendants(definition):
        if isinstance(node, cst.Call):
            func = node.func
            name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
            if name in TRACER_QUESTIONS:
                return True
    return False


def _syntax_facts(ctx: RewriteContext, function: types.FunctionType) -> SyntaxFacts | None:
    if function in ctx.caches.syntax_facts:
        return ctx.caches.syntax_facts[function]
    parsed = parse_checked(ctx, function)
    body = parsed.definition.body.body
    nodes = [n for stmt in body for n in descendants(stmt)]
    # super() is resolved by a pass (rewriter.super_calls): such a callee is rewritten to see what it calls
    branching = any(isinstance(n, _BRANCHING) or converts(n) or is_super_call(n) for n in nodes) or _generator(function)
    early_return = any(contains(stmt, (cst.Return,), into_loops=True) for stmt in body[:-1])
    # a statement refused where reached (rewriter.deferred_refusals): the rewrite decides, never a trace
    branching = branching or any(isinstance(v, DeferredRefusal) for v in parsed.imports.values())
    facts = None
    # a callee that writes module state is inlined, so that its writes are threaded (rewriter.state_threading)
    # so is every hook written out at its module's call (rewriter.written_hooks): its result decides the output
    if (not branching and not early_return and not parsed.higher_order and function not in ctx.state.writers
            and not is_written_hook(ctx, function)):
        facts = SyntaxFacts(parsed, [n for n in nodes if isinstance(n, cst.Call)], bound_names(parsed.definition))
    ctx.caches.syntax_facts[function] = facts
    return facts


def branch_free(ctx: RewriteContext, function: types.FunctionType, receiver: Static | None,
                index: ModuleIndex) -> bool:
    """A cheap proof that calling ``function`` never branches on data (see the
    module docstring); ``index``: the caller's. False means "maybe" (the callee
    is then rewritten)."""
    key = (function, _receiver_key(ctx, receiver))
    if key in ctx.caches.branch_free:
        return ctx.caches.branch_free[key]
    ctx.caches.branch_free[key] = False  # a cycle is not provably branch-free
    facts = _syntax_facts(ctx, function)
    # a call that may read module state some method writes is inlined: kept, it would be traced with the
    # state's value now as a constant (rewriter.state_threading threads the inlined reads)
    result = facts is not None and not (receiver is not None and ctx.state.reaches(receiver.value))
    if result:
        env = Env()
        params = facts.parsed.definition.params.params
        if receiver is not None and params:
            env.bind(params[0].name.value, receiver)
        flow = StaticFlow(ctx, facts.locals, facts.parsed.globals, index)
        result = all(_call_is_branch_free(ctx, flow, env, call) for call in facts.calls)
    ctx.caches.branch_free[key] = result
    return result


def _module_first(callee: Callee) -> Static | None:
    """The static module a function is called with as its first parameter (``func(self, *args)`` in a
    decorator's wrapper): what its ``self.<child>(...)`` calls reach, for ``branch_free``."""
    params = list(inspect.signature(callee.function, follow_wrapped=False).parameters)
    first = callee.static.get(params[0]) if params else None
    return first if first is not None and isinstance(first.value, torch.nn.Module) else None


def _touches_state(ctx: RewriteContext, callee: Callee) -> bool:
    """Whether the callee writes module state or may read it (``rewriter.state_table``): then it is
    inlined even without control flow, so that the state is threaded, not traced as a constant."""
    receiver = callee.receiver
    return callee.function in ctx.state.writers or (receiver is not None and ctx.state.reaches(receiver.value)) or (
        is_written_hook(ctx, callee.function))  # a hook written out: its result decides the output


def _receiver_key(ctx: RewriteContext, receiver: Static | None) -> object:
    """What a callee's rewrite depends on about its receiver: its ``fingerprint`` (so the 54
    blocks of one class and configuration are looked at once), or its identity."""
    if receiver is None:
        return None
    if isinstance(receiver.value, torch.nn.Module):
        return fingerprint(receiver.value, ctx.caches.fingerprints)
    return ("object", id(receiver.value))


def _call_is_branch_free(ctx: RewriteContext, flow: StaticFlow, env: Env, call: cst.Call) -> bool:
    """Whether ``call`` provably never branches on data: what it calls, and the user functions it
    is passed as arguments (``max(items, key=score)``, ``map(f, ...)``), which it may call."""
    return _called_is_branch_free(ctx, flow, env, call) and all(
        _passed_is_branch_free(ctx, flow, env, arg.value) for arg in call.args)


def _passed_is_branch_free(ctx: RewriteContext, flow: StaticFlow, env: Env, value: cst.BaseExpression) -> bool:
    """For an argument that is a user function or a module's method (``key=score``), whether
    calling it provably never branches on data; any other argument: True."""
    if not isinstance(value, (cst.Name, cst.Attribute)):
        return True
    static = flow.evaluate(value, env)
    target = static.value if static is not None else None
    if isinstance(target, types.MethodType) and isinstance(target.__self__, torch.nn.Module):
        function = user_function(target.__func__, ctx)
        return not ctx.rewrites(function) or branch_free(ctx, function, Static(target.__self__, value), flow.index)
    if isinstance(target, types.FunctionType):
        function = user_function(target, ctx)
        return not ctx.rewrites(function) or branch_free(ctx, function, None, flow.index)
    return True


def _called_is_branch_free(ctx: RewriteContext, flow: StaticFlow, env: Env, call: cst.Call) -> bool:
    func = flow.evaluate(call.func, env)
    if func is None:
        return not (isinstance(call.func, cst.Name) and call.func.value in flow.locals)
    target = func.value
    if isinstance(target, torch.nn.Sequential):
        return all(_module_is_branch_free(ctx, m, func.term, flow.index) for m in target)
    if isinstance(target, torch.nn.Module):
        return _module_is_branch_free(ctx, target, func.term, flow.index)
    if isinstance(target, types.MethodType) and isinstance(target.__self__, torch.nn.Module):
        owner, function = target.__self__, user_function(target.__func__, ctx)
        return not ctx.rewrites(function) or branch_free(ctx, function, Static(owner, func.term), flow.index)
    if isinstance(target, types.FunctionType):
        function = user_function(target, ctx)
        receiver = explicit_receiver(flow, call, env, target)  # Parent.method(self, x)
        return not ctx.rewrites(function) or branch_free(ctx, function, receiver, flow.index)
    method = call_method(target)  # a callable object of a user class
    return method is None or not ctx.rewrites(method) or branch_free(ctx, method, func, flow.index)


def _module_is_branch_free(ctx: RewriteContext, module: torch.nn.Module, term: cst.BaseExpression,
                           index: ModuleIndex) -> bool:
    """Whether calling ``module`` provably never branches on data; its forward is
    found as Python finds it (an instance attribute wins)."""
    try:
        resolved = resolve_method(module)
    except UnsupportedError:
        return not is_user_code(type(module))  # user code: "maybe", and inlining it reports the error
    if not isinstance(resolved.function, types.FunctionType):  # a class-based decorator of forward: "maybe"
        return call_method(resolved.function) is None
    function = user_function(resolved.function, ctx)
    return not ctx.rewrites(function) or branch_free(ctx, function, Static(resolved.owner, term), index)


def _static_key(static: Static) -> tuple:
    """What a callee's rewrite depends on about one static argument. An object's term is
    part of it: the rewritten body reads the object through that term (``receiver.fc``, the
    caller's own receiver placeholder), so a body cached for one term is not one for another."""
    value = static.value
    if is_literal(value) and not holds_container(value):  # a container's identity matters (aliasing)
        return ("literal", type(value).__name__, repr(value))
    return ("object", id(value), _EMPTY.code_for_node(static.term))



def rewrite_callee(ctx: RewriteContext, callee: Callee, call_site: cst.BaseStatement, index: ModuleIndex,
                   run_body: RunBody) -> InlinedBody | None:
    """The callee's body specialised to its static arguments, or None when it
    has no data-dependent control flow (the call is then kept); ``index``: the caller's.

    Note: sharing one rewrite between instances. A body is rewritten with its
    receiver written as a placeholder name and cached under the receiver's
    ``fingerprint``; each call site substitutes its own receiver path. So a
    gate class used by 100 blocks is rewritten once, not 100 times.
    """
    receiver = callee.receiver
    if branch_free(ctx, callee.function, receiver if receiver is not None else _module_first(callee), index):
        return None
    key = (callee.function, _receiver_key(ctx, receiver),
           tuple(sorted((n, _static_key(s)) for n, s in callee.static.items() if s is not receiver)),
           tuple(sorted(callee.dynamic)), tuple(sorted(callee.sizes.items())))
    if key not in ctx.caches.callees:
        ctx.caches.callees[key] = _rewrite_specialised(ctx, callee, call_site, index, run_body, key)
    cached = ctx.caches.callees[key]
    if cached is None or receiver is None:
        return cached
    inlined = cached.inlined
    return InlinedBody(inlined.body, inlined.params, inlined.assigned, {cached.placeholder: receiver.term})


def _reserve_free_names(ctx: RewriteContext, parsed: ParsedFunction, names: set[str]) -> None:
    """Take the names a callee reads from outside before its passes draw fresh names, as the root's
    are taken (``rewriter._entry``): a global registered under its own name where it is free, any
    other name reserved. Else a pass's fresh name could be one of them, and the inlined body would
    read its own local for the global (``max(items, key=score)`` lowered to ``score = score(t)``)."""
    scope = parsed.globals
    for name in sorted(names):
        if name in scope:
            ctx.globals.resolve(name, scope)
        else:
            ctx.namespace.reserve(name)


def _rewrite_specialised(ctx: RewriteContext, callee: Callee, call_site: cst.BaseStatement,
                         outer_index: ModuleIndex, run_body: RunBody, frame: tuple) -> CachedCallee | None:
    """Note: recursion with a static depth. A call is rewritten for its static arguments
    (``frame``: the cache key), so a recursive call whose static arguments differ
    (``self._apply(x, depth - 1)``) is another specialisation, which constant propagation
    ends where the depth test folds. The same call again would never end, and is refused;
    so is a chain deeper than ``MAX_RECURSION``."""
    receiver = callee.receiver
    depth = sum(f[0] is callee.function for f in ctx.call_stack)
    if frame in ctx.call_stack or depth >= MAX_RECURSION:
        raise ctx.error(f"recursion ({callee.function.__qualname__} calls itself"
                        + (" with the same static arguments)" if frame in ctx.call_stack
                           else f" more than {MAX_RECURSION} levels deep)"), call_site,
                        "bound the recursion by a static argument (a depth that decreases to a base case)")
    parsed = parse_checked(ctx, callee.function)
    if callee.forwarded is not None:  # *args/**kwargs as parameters of their own (rewriter.forwarding)
        parsed = dataclasses.replace(parsed, definition=specialise(parsed.definition, callee.forwarded))
    bound = bound_names(parsed.definition)
    _reserve_free_names(ctx, parsed, all_names(parsed.definition) - bound)
    for name in sorted(bound):
        if name in parsed.function.__globals__ or name in sys.modules:
            # a local that shadows a global or names a module (``import torch`` inside the function,
            # ``rewriter.local_imports``): renamed, so that the name stays the global for every other
            # function (the flow reads a generated name as a local, never as a global)
            ctx.namespace.reserve(name)
    mapping = {name: ctx.namespace.fresh(name) for name in sorted(bound)}
    definition = rename(parsed.definition, mapping)
    env = Env()
    placeholder = None
    index = outer_index
    for name, static in callee.static.items():
        if static is receiver:
            placeholder = ctx.namespace.fresh("receiver")
            static = Static(receiver.value, cst.Name(placeholder))
            if isinstance(receiver.value, torch.nn.Module):  # else a callable object's (call_method)
                index = ModuleIndex(receiver.value, static.term, outer=outer_index)
            # passes write the receiver's submodules as terms on the placeholder
            # (``receiver.blocks[0]``); later passes must be able to evaluate them
            env.bind(placeholder, static)
        elif holds_container(static.value):  # the inlined call binds it to its parameter (Inline._bind_dynamic)
            static = Static(static.value, cst.Name(mapping[name]))
        elif isinstance(static.value, torch.nn.Module) and isinstance(static.term, cst.Name) and (
                static.term.value not in mapping.values()):
            # a module passed by its caller's name (a placeholder): constant propagation writes that
            # name for the parameter, and later passes must still evaluate it (a lookup keyed on it)
            env.bind(static.term.value, static)
        env.bind(mapping[name], static)
    ctx.call_stack.append(frame)
    try:
        sizes = {mapping[name]: sizes for name, sizes in callee.sizes.items() if name in mapping}
        body = run_body(parsed, definition, env, index, sizes)
    finally:
        ctx.call_stack.pop()
    if not parsed.higher_order and not _generator(callee.function) and not asks_the_tracer(
            parsed.definition) and not any(contains(stmt, (cst.If,), into_loops=True) for stmt in body) and not any(
            converts(n) for stmt in body for n in descendants(stmt)) and not _touches_state(ctx, callee):
        return None  # kept as a call; a generator's list is inlined, so that its length is known
    params = {p: mapping[p] for p in (*callee.static, *callee.dynamic) if p in mapping}
    inlined = InlinedBody(body, params)
    return WithPlaceholder(inlined, placeholder) if receiver is not None else inlined
