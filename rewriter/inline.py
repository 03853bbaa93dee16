"""Pass: inline calls whose callee has data-dependent control flow."""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst
import torch
from dycl.rewriter.context import RewriteContext
from dycl.rewriter.decorators import undecorate
from dycl.rewriter.errors import SourceLocation, UnsupportedError
from dycl.rewriter.exits import Block, contains, rebuild_if
from dycl.rewriter.flow import Env, Exits, StaticFlow, else_body
from dycl.rewriter.forward import ResolvedMethod, refuse_overridden_call, resolve_method
from dycl.rewriter.forwarding import Forwarded
from dycl.rewriter.hooked_calls import HookedCall, hooked_call_lines
from dycl.rewriter.hooks import forward_hooks
from dycl.rewriter.locations import comment_of, context_of, set_location, with_context
from dycl.rewriter.passes import FlowWalker, FunctionUnit
from dycl.rewriter.star_arguments import spread_arguments
from dycl.rewriter.substitute import replace_names
from dycl.rewriter.user_code import is_user_code
from dycl.rewriter.values import DictKeys, ModuleIndex, Static, canonical_term, literal_term
from dycl.rewriter.walk import bound_names, descendants, map_children
from dycl.rewriter.written_hooks import WrittenHooks, written_hook_lines


@dataclass
class Callee:
    """A resolved call: the Python function, its receiver, and what each parameter is bound to.

    ``static`` parameters are known at compile time; ``dynamic`` ones map to the
    caller's argument expression; ``sizes``: those passed an input of the root by its name, which
    the caller never rebinds, and that input's sizes (``FunctionUnit.input_sizes``).
    """

    function: types.FunctionType
    receiver: Static | None
    static: dict[str, Static] = field(default_factory=dict)
    dynamic: dict[str, cst.BaseExpression] = field(default_factory=dict)
    forwarded: Forwarded | None = None  # its *args/**kwargs as parameters of their own (rewriter.forwarding)
    sizes: dict[str, tuple[int | None, ...]] = field(default_factory=dict)


@dataclass
class InlinedBody:
    """A callee rewritten for one binding: straight-line code and ``if``s whose
    ``return`` statements end every path; ``params`` maps parameter names to
    the fresh names used in ``body``; ``assigned`` are the names ``body`` assigns;
    ``pending`` are substitutions still to apply (the receiver placeholder)."""

    def __init__(self, body: Block, params: dict[str, str], assigned: frozenset[str] | None = None,
                 pending: dict[str, cst.BaseExpression] | None = None) -> None:
        self.body = body
        self.params = params
        self.pending = pending or {}
        self.assigned = assigned if assigned is not None else frozenset(
            name for stmt in body for name in bound_names(stmt))


@functools.lru_cache(maxsize=4096)
def _signature(function: types.FunctionType) -> inspect.Signature:
    return inspect.signature(function, follow_wrapped=False)  # a wrapper binds its own parameters


def explicit_receiver(flow: StaticFlow, call: cst.Call, env: Env, function: types.FunctionType) -> Static | None:
    """The receiver of ``Cls.method(obj, ...)`` — a method called through its class, as
    ``super().method(...)`` is rewritten (``rewriter.super_calls``) — where ``Cls`` defines
    ``function`` as ``method`` and ``obj`` is a static module that is an instance of ``Cls``;
    None for any other call."""
    if not (isinstance(call.func, cst.Attribute) and call.args and call.args[0].keyword is None
            and not call.args[0].star):
        return None
    owner = flow.evaluate(call.func.value, env)
    cls = owner.value if owner is not None else None
    if not isinstance(cls, type) or vars(cls).get(call.func.attr.value) is not function:
        return None
    receiver = flow.evaluate(call.args[0].value, env)
    if receiver is None or not isinstance(receiver.value, torch.nn.Module) or not isinstance(receiver.value, cls):
        return None
    return receiver


def _forwarded(function: types.FunctionType, arguments: dict, packs: dict) -> tuple[Forwarded, dict]:
    """The synthetic parameters for ``packs`` (the bound ``*``/``**`` values) and the arguments
    with each pack replaced by its elements under those names."""
    taken = set(function.__code__.co_varnames)

    def fresh(base: str) -> str:
        name, n = base, 1
        while name in taken:
            name, n = f"{base}_{n}", n + 1
        taken.add(name)
        return name

    star = double_star = None
    positional: tuple[str, ...] = ()
    keywords: dict[str, str] = {}
    flat = {name: value for name, value in arguments.items() if name not in packs}
    for name, value in packs.items():
        if isinstance(value, dict):
            double_star, keywords = name, {key: fresh(f"{name}_{key}") for key in value}
            flat.update({keywords[key]: item for key, item in value.items()})
        else:
            star, positional = name, tuple(fresh(f"{name}_{i}") for i in range(len(value)))
            flat.update(dict(zip(positional, value)))
    return Forwarded(star, positional, double_star, keywords), flat


def user_function(function: object, ctx: RewriteContext | None = None) -> object:
    """``function`` with its harmless decorators peeled when it wraps user code or followed
    library code (``ctx.followed``; ``rewriter.decorators``: other decorators of user code are
    refused, a followed wrapper is compiled as the closure it is)."""
    followed = ctx.followed if ctx is not None else frozenset()
    if hasattr(function, "__wrapped__") and (is_user_code(inspect.unwrap(function))
                                             or getattr(function, "__code__", None) in followed):
        return undecorate(function, closures=True, followed=followed)
    return function


def call_method(target: object) -> types.FunctionType | None:
    """``type(target).__call__`` where ``target`` is an instance of a user class (not a module, not
    a class): calling it runs that method with ``target`` as ``self`` (a class-based decorator)."""
    if isinstance(target, (type, torch.nn.Module, types.FunctionType, types.MethodType)):
        return None
    method = next((vars(base)["__call__"] for base in type(target).__mro__ if "__call__" in vars(base)), None)
    return method if isinstance(method, types.FunctionType) and is_user_code(method) else None


class Inline(FlowWalker):
    """Replaces a call of a helper method, function or submodule by its body when
    that body, specialised to the call's static arguments, still branches on
    data.

    Assumes: the body is loop-free (after ``Unroll``).
    Guarantees: every remaining call of user code is control-flow free for its
    arguments (tracing it gives the same graph for every input); inlined locals
    have fresh names; a ``return`` in the callee becomes an assignment to the
    call's target (or stays a ``return`` when the call was returned); a call
    nested in a larger expression is first hoisted into a fresh temporary. An
    ``nn.Sequential`` whose children need inlining is expanded into one call
    per child.
    """

    name = "inline"
    description = "inline helpers and submodules that still branch on data"

    def __init__(self, unit: FunctionUnit) -> None:
        super().__init__(unit)
        self.rewrite_callee = unit.rewrite_callee

    def statement(self, stmt: cst.BaseStatement, env: Env) -> tuple[Block, Exits]:
        new = self.replace(stmt, env)
        return new, self.flow.run_block(new, env)

    def replace(self, stmt: cst.BaseStatement, env: Env) -> Block:
        """The statements replacing ``stmt``: its calls that must be inlined, inlined."""
        if isinstance(stmt, cst.If):
            hoisted, test = self.hoist(stmt.test, stmt, env)
            stmt = stmt.with_changes(test=test)
            static = self.flow.evaluate(test, env)
            if static is not None:
                taken = list(stmt.body.body) if static.value else else_body(stmt)
                new_taken = self.block(taken, env.copy())[0]
                body, orelse = (new_taken, else_body(stmt)) if static.value else (list(stmt.body.body), new_taken)
            else:
                body = self.block(list(stmt.body.body), env.copy())[0]
                orelse = self.block(else_body(stmt), env.copy())[0]
            return hoisted + [rebuild_if(stmt, body, orelse)]
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            return [stmt]
        small = stmt.body[0]
        direct = _direct_call(small)
        if direct is not None:
            expansion = self.expand(direct, stmt, env)
            if expansion is not None:
                hoisted, call = self.hoist_arguments(direct, stmt, env)
                return hoisted + self.splice(call, expansion, small, stmt, env)
        hoisted, new_small = self.hoist(small, stmt, env)
        return hoisted + [stmt.with_changes(body=[new_small])]

    # -- finding calls to inline -----------------------------------------------------------------

    def hoist(self, node: cst.CSTNode, stmt: cst.BaseStatement, env: Env) -> tuple[Block, cst.CSTNode]:
        """Move every call that must be inlined out of ``node`` into temporaries."""
        calls = [n for n in descendants(node, stop=(cst.Lambda,)) if isinstance(n, cst.Call)]
        expansions = {id(call): self.expand(call, stmt, env) for call in calls}
        if all(expansion is None for expansion in expansions.values()):
            return [], node
        sites: list[tuple[str, cst.Call, InlinedBody | Block | HookedCall]] = []

        def replace_calls(current: cst.CSTNode) -> cst.CSTNode:
            if isinstance(current, cst.Lambda):
                return current
            updated = map_children(current, replace_calls)
            expansion = expansions.get(id(current))
            if expansion is None:
                return updated
            temp = self.ctx.namespace.fresh("out")
            sites.append((temp, updated, expansion))
            return cst.Name(temp)

        new_node = replace_calls(node)
        hoisted: Block = []
        for temp, call, expansion in sites:
            target = cst.Assign([cst.AssignTarget(cst.Name(temp))], call)
            line = set_location(cst.SimpleStatementLine([target]), comment_of(stmt))
            hoisted += self.splice(call, expansion, target, line, env)
        return hoisted, new_node

    def hoist_arguments(self, call: cst.Call, stmt: cst.BaseStatement, env: Env) -> tuple[Block, cst.Call]:
        hoisted, new_args = [], []
        for arg in call.args:
            more, value = self.hoist(arg.value, stmt, env)
            hoisted += more
            new_args.append(arg.with_changes(value=value))
        return hoisted, call.with_changes(args=new_args)

    def resolve(self, call: cst.Call, env: Env) -> tuple[Callee | None, torch.nn.Sequential | None]:
        func = self.flow.evaluate(call.func, env)
        if func is None:
            return None, None
        target = func.value
        receiver: Static | None = None
        if isinstance(target, torch.nn.Sequential):
            return None, target
        if isinstance(target, torch.nn.Module):
            try:
                resolved = resolve_method(target)  # an instance attribute forward wins, as in Python
            except UnsupportedError:
                if is_user_code(type(target)):
                    raise
                return None, None  # library code: opaque, as before
            function, owner = resolved.function, resolved.owner
            receiver = func if owner is target else _owner_static(owner, resolved, self.ctx, self.flow.index)
            if resolved.keywords and self.ctx.rewrites(function):
                call = call.with_changes(args=[*call.args, *_partial_arguments(resolved, self.ctx, self.flow.index)])
            if not isinstance(function, types.FunctionType) and call_method(function) is not None:
                # a class-based decorator of forward (rewriter.forward): its __call__, with the module first
                decorator = self.ctx.globals.introduce(f"{type(target).__name__}_forward", function)
                call = call.with_changes(args=[cst.Arg(receiver.term), *call.args])
                function, receiver = call_method(function), decorator
        elif isinstance(target, types.MethodType) and isinstance(target.__self__, torch.nn.Module):
            function = target.__func__
            owner = target.__self__
            receiver = Static(owner, canonical_term(owner, self.flow.index) or call.func.value)
        elif isinstance(target, types.FunctionType):
            function = target
            receiver = explicit_receiver(self.flow, call, env, target)
            if receiver is not None:  # Parent.method(self, x): a method call on self
                call = call.with_changes(args=call.args[1:])
        elif call_method(target) is not None:  # an instance of a user class: a class-based decorator
            function, receiver = call_method(target), func
        elif _bound_decorator(target):  # module.forward looked up through a class-based decorator's __get__
            term = canonical_term(target.args[0], self.flow.index)
            if term is None:
                return None, None
            receiver = self.ctx.globals.introduce(f"{type(target.args[0]).__name__}_forward", target.func)
            call = call.with_changes(args=[cst.Arg(term), *call.args])
            function = call_method(target.func)
        else:
            return None, None
        function = user_function(function, self.ctx)
        if not isinstance(function, types.FunctionType) or not self.ctx.rewrites(function):
            return None, None
        if isinstance(target, torch.nn.Module):  # its forward is inlined: a __call__ of its class's own is not run
            refuse_overridden_call(target)
        return self.bind_arguments(function, receiver, call, env), None

    def bind_arguments(self, function: types.FunctionType, receiver: Static | None, call: cst.Call,
                       env: Env) -> Callee | None:
        spread = spread_arguments(list(call.args), lambda node: self.flow.evaluate(node, env),
                                  lambda node: self.flow.static_length(node, env),
                                  lambda node: _dict_keys(node, env))
        if spread is None:  # a pack whose length or keys are not static: the call stays as it is
            return None
        positional, keywords = spread
        signature = _signature(function)
        try:
            bound = signature.bind(*([receiver] if receiver is not None else []), *positional, **keywords)
        except TypeError:
            return None
        bound.apply_defaults()
        callee = Callee(function, receiver)
        packs = {name: value for name, value in bound.arguments.items() if signature.parameters[name].kind in (
            inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)}
        if packs and not all(isinstance(self._pack(value, isinstance(value, dict), env), Static)
                             for value in packs.values()):
            # a dynamic element: each element a parameter of its own (rewriter.forwarding)
            callee.forwarded, bound_arguments = _forwarded(function, bound.arguments, packs)
        else:
            bound_arguments = bound.arguments
        for name, value in bound_arguments.items():
            kind = signature.parameters[name].kind if name in signature.parameters else None
            if kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                # Python's binding: extra positionals in a tuple, extra keywords in a dict
                packed = self._pack(value, kind is inspect.Parameter.VAR_KEYWORD, env)
                if isinstance(packed, Static):
                    callee.static[name] = packed
                else:
                    callee.dynamic[name] = packed
            elif isinstance(value, Static):
                callee.static[name] = value
            elif isinstance(value, cst.BaseExpression):
                static = self.flow.evaluate(value, env)
                if static is not None:
                    callee.static[name] = static
                else:
                    callee.dynamic[name] = value
            else:
                term = canonical_term(value, self.flow.index)
                if term is None:
                    return None
                callee.static[name] = Static(value, term)
        callee.sizes = self._passed_inputs(callee.dynamic)
        return callee

    def _passed_inputs(self, dynamic: dict[str, cst.BaseExpression]) -> dict[str, tuple[int | None, ...]]:
        """The parameters passed one of this body's inputs of known sizes by its name, where the body
        never rebinds that name: the callee's parameter is that input on every call."""
        known = self.unit.input_sizes
        if not known:
            return {}
        rebound = {name for stmt in self.unit.definition.body.body for name in bound_names(stmt)}
        return {name: known[arg.value] for name, arg in dynamic.items()
                if isinstance(arg, cst.Name) and arg.value in known and arg.value not in rebound}

    def _pack(self, value: tuple | dict, keywords: bool, env: Env) -> Static | cst.BaseExpression:
        """The ``*args`` tuple or ``**kwargs`` dict of a call: static when every element is."""
        items = list(value.items()) if keywords else list(enumerate(value))
        # the receiver of a method whose function takes *args (a decorator's wrapper) is a Static already
        statics = {key: expr if isinstance(expr, Static) else self.flow.evaluate(expr, env) for key, expr in items}
        if all(static is not None for static in statics.values()):
            if keywords:
                term = cst.Dict([cst.DictElement(literal_term(key), statics[key].term) for key, _ in items])
                packed = {key: statics[key].value for key, _ in items}
                self.ctx.fresh.add(packed)  # Python makes a new dict at each call: the callee may change it
                return Static(packed, term)
            values = tuple(statics[key].value for key, _ in items)
            return Static(values, _tuple([statics[key].term for key, _ in items]))
        items = [(key, expr.term if isinstance(expr, Static) else expr) for key, expr in items]
        if keywords:
            return cst.Dict([cst.DictElement(literal_term(key), expr) for key, expr in items])
        return _tuple([expr for _, expr in items])

    def expand(self, call: cst.Call, stmt: cst.BaseStatement,
               env: Env) -> InlinedBody | Block | HookedCall | WrittenHooks | None:
        """What replaces ``call``: an inlined body, an expanded Sequential, hooks written out, or None (keep it)."""
        written = self._written_hooks(call, env)
        if written is not None:
            return written
        callee, sequential = self.resolve(call, env)
        if sequential is not None:
            expansion = self._expand_sequential(call, sequential, stmt, env)
        elif callee is None:
            return None
        else:
            expansion = self.rewrite_callee(callee, stmt)
        target = self.flow.evaluate(call.func, env)
        if expansion is None or target is None or not isinstance(target.value, torch.nn.Module):
            return expansion
        if forward_hooks(target.value):  # __call__'s hooks around the inlined forward
            return HookedCall(target.value, canonical_term(target.value, self.flow.index) or call.func)
        return expansion

    def _written_hooks(self, call: cst.Call, env: Env) -> WrittenHooks | None:
        """A call of a module whose hooks write state (``rewriter.written_hooks``), else None."""
        if not self.ctx.written_hooks:
            return None
        target = self.flow.evaluate(call.func, env)
        if target is None or not isinstance(target.value, torch.nn.Module) or (
                id(target.value) not in self.ctx.written_hooks):
            return None
        term = canonical_term(target.value, self.flow.index)
        return None if term is None else WrittenHooks(target.value, term)

    def _expand_sequential(self, call: cst.Call, sequential: torch.nn.Sequential, stmt, env) -> Block | None:
        if len(call.args) != 1 or call.args[0].keyword or call.args[0].star:
            return None
        path = canonical_term(sequential, self.flow.index)
        if path is None:
            return None
        probe_calls = [cst.Call(cst.Subscript(path, [cst.SubscriptElement(cst.Index(literal_term(i)))]),
                                [cst.Arg(cst.Name("_"))]) for i in range(len(sequential))]
        probe_env = env.copy()
        if not any(self.expand(probe, stmt, probe_env) is not None for probe in probe_calls):
            return None
        return [probe.with_changes(args=[call.args[0]]) for probe in probe_calls]

    # -- splicing -------------------------------------------------------------------------------

    def splice(self, call: cst.Call, expansion: InlinedBody | Block | HookedCall | WrittenHooks,
               small: cst.BaseSmallStatement, stmt: cst.BaseStatement, env: Env, wrap: Callable | None = None,
               consumed: frozenset[str] = frozenset()) -> Block:
        """The statements that replace ``small`` (``T = call``, ``return call`` or ``call``);
        ``wrap`` changes each value the callee returns (its forward hooks)."""
        if isinstance(expansion, list):
            return self._splice_sequential(expansion, small, stmt, env)
        if isinstance(expansion, HookedCall):
            return self._splice_hooked(call, expansion, small, stmt, env)
        if isinstance(expansion, WrittenHooks):
            def is_static(value: cst.BaseExpression) -> bool:
                return self.flow.evaluate(value, env) is not None

            lines = written_hook_lines(self.ctx, expansion, call, small, stmt, is_static,
                                       lambda value: canonical_term(value, self.flow.index))
            return self.block(lines, env.copy())[0]
        callee, _ = self.resolve(call, env)
        prologue, renames = self._bind_dynamic(callee, expansion, stmt, consumed)
        substitutions = {**expansion.pending, **{old: cst.Name(new) for old, new in renames.items()}}
        body = [replace_names(s, substitutions.get) for s in expansion.body] if substitutions else expansion.body
        context = context_of(comment_of(stmt))  # a call in an unrolled iteration: its body is in that iteration
        body = with_context(body, context) if context else body
        writer = _result_writer(small) if wrap is None else self._wrapped_writer(small, wrap)
        return prologue + replace_returns(body, writer, comment_of(stmt))

    def _wrapped_writer(self, small: cst.BaseSmallStatement, wrap: Callable) -> Callable:
        """Writes ``wrap(value)``; a returned one is first assigned, so that the hooks run in the
        graph and the host only returns their result."""
        plain = _result_writer(small)

        def write(value: cst.BaseExpression | None) -> list:
            wrapped = wrap(value if value is not None else cst.Name("None"))
            if not isinstance(small, cst.Return):
                return plain(wrapped)
            name = cst.Name(self.ctx.namespace.fresh("hook_out"))
            return [cst.Assign([cst.AssignTarget(name)], wrapped), cst.Return(name)]
        return write

    def _splice_sequential(self, calls: list[cst.Call], small, stmt, env, wrap: Callable | None = None) -> Block:
        lines: Block = []
        current = calls[0].args[0].value
        for i, child_call in enumerate(calls):
            last = i == len(calls) - 1
            child_call = child_call.with_changes(args=[cst.Arg(current)])
            if last:
                new_smalls = [_with_call(small, child_call)] if wrap is None else (
                    self._wrapped_writer(small, wrap)(child_call))
            else:
                temp = self.ctx.namespace.fresh("out")
                new_smalls = [cst.Assign([cst.AssignTarget(cst.Name(temp))], child_call)]
                current = cst.Name(temp)
            for new_small in new_smalls:
                line = set_location(cst.SimpleStatementLine([new_small]), comment_of(stmt))
                lines += self.block([line], self.flow.run_block(lines, env.copy()).fall)[0]
        return lines

    def _splice_hooked(self, call: cst.Call, hooked: HookedCall, small, stmt, env) -> Block:
        """The module's hooks written out around its inlined forward (``rewriter.hooked_calls``)."""
        def is_static(value: cst.BaseExpression) -> bool:
            return self.flow.evaluate(value, env) is not None

        written = hooked_call_lines(self.ctx, hooked, call, stmt, is_static)
        lines: Block = []
        for line in written.prefix:
            lines += self.block([line], self.flow.run_block(lines, env.copy()).fall)[0]
        inner = self.flow.run_block(lines, env.copy()).fall
        if isinstance(hooked.module, torch.nn.Sequential):  # its children, called one after the other
            sequential_call = cst.Call(hooked.term, written.forward.args)
            calls = self._expand_sequential(sequential_call, hooked.module, stmt, inner)
            if calls is not None:
                return lines + self._splice_sequential(calls, small, stmt, inner, written.wrap)
        expansion = self.expand(written.forward, stmt, inner)
        if expansion is not None:
            return lines + self.splice(written.forward, expansion, small, stmt, inner, written.wrap, written.consumed)
        if written.wrap is None:
            final = [small.with_changes(value=written.forward)]
        else:
            final = self._wrapped_writer(small, written.wrap)(written.forward)
        return lines + [set_location(cst.SimpleStatementLine([one]), comment_of(stmt)) for one in final]

    def _bind_dynamic(self, callee: Callee, inlined: InlinedBody, stmt,
                      consumed: frozenset[str] = frozenset()) -> tuple[Block, dict[str, str]]:
        """``consumed``: argument names nothing reads after the call, as if the call overwrote them."""
        prologue: Block = []
        renames: dict[str, str] = {}
        reassigned = inlined.assigned
        overwritten = _overwritten_by(stmt) | consumed
        arg_names = [a.value for a in callee.dynamic.values() if isinstance(a, cst.Name)]
        for name, arg in callee.dynamic.items():
            fresh = inlined.params[name]
            if isinstance(arg, cst.Name) and (
                fresh not in reassigned or (arg.value in overwritten and arg_names.count(arg.value) == 1)
            ):
                renames[fresh] = arg.value
            else:
                line = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(fresh))], arg)])
                prologue.append(set_location(line, comment_of(stmt)))
        for name, static in callee.static.items():
            if not static.substitutable and name in inlined.params:
                line = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(inlined.params[name]))],
                                                           static.term)])
                prologue.append(set_location(line, comment_of(stmt)))
        return prologue, renames


def _where(resolved: ResolvedMethod) -> SourceLocation | None:
    code = getattr(resolved.function, "__code__", None)
    return SourceLocation(code.co_filename, code.co_firstlineno) if code is not None else None


def _bound_decorator(target: object) -> bool:
    """Whether ``target`` is ``functools.partial(decorator, module)``: a class-based decorator of a
    module's method, bound by its ``__get__`` (``rewriter.forward``)."""
    return (isinstance(target, functools.partial) and not target.keywords and len(target.args) == 1
            and isinstance(target.args[0], torch.nn.Module) and call_method(target.func) is not None)


def _owner_static(owner: torch.nn.Module, resolved: ResolvedMethod, ctx: RewriteContext,
                  index: ModuleIndex) -> Static:
    """The receiver of a forward set to another module's method; it must be part of the model."""
    term = canonical_term(owner, index)
    if term is None:
        raise ctx.error(f"a forward set to a method of {type(owner).__qualname__}, which is not a submodule "
                        "of the model", None, "register that module as a submodule", location=_where(resolved))
    return Static(owner, term)


def _partial_arguments(resolved: ResolvedMethod, ctx: RewriteContext, index: ModuleIndex) -> list[cst.Arg]:
    """The keywords a ``functools.partial`` forward binds, as call arguments."""
    args = []
    for name, value in resolved.keywords.items():
        term = canonical_term(value, index)
        if term is None:
            raise ctx.error(f"a forward set to functools.partial(..., {name}={value!r:.40})", None,
                            "bind only literals or submodules with partial", location=_where(resolved))
        args.append(cst.Arg(term, keyword=cst.Name(name)))
    return args


def _tuple(elements: list[cst.BaseExpression]) -> cst.BaseExpression:
    return cst.Tuple([cst.Element(e) for e in elements]) if elements else cst.parse_expression("()")


def _overwritten_by(stmt: cst.BaseStatement) -> set[str]:
    """Names the call statement assigns: an argument variable in this set may be
    used by the inlined body as its own parameter (``x = block(x)``)."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign):
        return {t.target.value for t in stmt.body[0].targets if isinstance(t.target, cst.Name)}
    return set()


def _direct_call(small: cst.BaseSmallStatement) -> cst.Call | None:
    """The call in ``T = call(...)``, ``return call(...)`` or ``call(...)``."""
    if isinstance(small, cst.Assign) and isinstance(small.value, cst.Call):
        return small.value
    if isinstance(small, (cst.Return, cst.Expr)) and isinstance(small.value, cst.Call):
        return small.value
    return None


def _with_call(small: cst.BaseSmallStatement, call: cst.Call) -> cst.BaseSmallStatement:
    return small.with_changes(value=call)


def _result_writer(small: cst.BaseSmallStatement) -> Callable[[cst.BaseExpression | None], list]:
    """How a callee's ``return value`` is written at this call site."""
    def write(value: cst.BaseExpression | None) -> list[cst.BaseSmallStatement]:
        value = value if value is not None else cst.Name("None")
        if isinstance(small, cst.Assign):
            if len(small.targets) == 1 and value.deep_equals(small.targets[0].target):
                return []
            return [cst.Assign(small.targets, value)]
        if isinstance(small, cst.Return):
            return [cst.Return(value)]
        if isinstance(value, (cst.Name, cst.BaseNumber, cst.BaseString)):
            return []
        return [cst.Expr(value)]
    return write


def replace_returns(stmts: Block, write, comment: cst.Comment | None) -> Block:
    """Replace every ``return v`` of a structured body by ``write(v)``; paths that
    fall off the end get ``write(None)``."""
    out: Block = []
    for stmt in stmts:
        if isinstance(stmt, cst.SimpleStatementLine) and any(isinstance(s, cst.Return) for s in stmt.body):
            before = []
            for small in stmt.body:
                if isinstance(small, cst.Return):
                    smalls = before + write(small.value)
                    return out + [stmt.with_changes(body=[one]) for one in smalls]  # one statement a line
                before.append(small)
        if isinstance(stmt, cst.If) and contains(stmt, (cst.Return,), into_loops=True):
            body = replace_returns(list(stmt.body.body), write, comment_of(stmt))
            orelse = replace_returns(else_body(stmt), write, comment_of(stmt))
            return out + [rebuild_if(stmt, body, orelse)]
        out.append(stmt)
    out += [set_location(cst.SimpleStatementLine([one]), comment) for one in write(None)]
    return out


def _dict_keys(node: cst.BaseExpression, env: Env) -> DictKeys | None:
    """The known key set of the dict a name holds (``rewriter.values.DictKeys``), if the flow has one."""
    fact = env.get(node.value) if isinstance(node, cst.Name) else None
    return fact if isinstance(fact, DictKeys) else None
