"""Program rewriting (paper §5.2): make a dynamic ``forward()`` loop-free and
constant-folded, so that every sub-DNN between two data-dependent branches is a
fixed computation.

Parsing a function first splices ``try`` statements (``rewriter.try_blocks``) and desugars
``torch.cond``/``map``, nested functions and lambdas into plain code (``rewriter.higher_order``). The passes, in order
(``rewriter.pipeline.PIPELINE``; the shape of a pass is ``rewriter.passes.Pass``):

1. normalize  — drop docstrings, splice ``with torch.no_grad():`` bodies
2. asserts    — ``assert t, m`` becomes ``if not (t): raise AssertionError(m)``
3. unroll     — unroll loops with static trip counts; break/continue become if/else
4. choices    — data-dependent choices (``a if c else b``, ``lo < m < hi``, ``heads[i](x)``) become ifs
5. super      — ``super().m(...)`` becomes ``Parent.m(self, ...)``
6. inline     — inline helper methods and submodules that still branch on data
7. constprop  — substitute and fold static values; drop ``if``s with static tests
8. dict_displays — a dict display read only at literal keys and by ``**`` becomes one variable per key
9. structure  — ``elif`` and early ``return`` become nested if/else

Module state the methods write (``rewriter.state_slots``, found before the passes so that no
pass folds it) is then threaded through the flat function as parameters and extra returned
values (``rewriter.state_threading``).

``rewrite(model, debug=True)`` keeps the source after every pass in ``.trace``.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import libcst as cst
import torch
from dycl.rewriter.arguments import FlatInput, FlatParameters, ReturnForm, flatten_parameters, flatten_returns
from dycl.rewriter.check import reject_unsupported
from dycl.rewriter.checking import checks_enabled
from dycl.rewriter.collector import paused_collector
from dycl.rewriter.context import GlobalTable, RewriteContext
from dycl.rewriter.decorated_entry import decorated_entry, entry_location, needs_entry, relocated
from dycl.rewriter.errors import SourceLocation, UnsupportedError
from dycl.rewriter.flow import Env
from dycl.rewriter.forward import ResolvedMethod, refuse_overridden_call, resolve_method, signature_of
from dycl.rewriter.function import RewrittenFunction, distinct_statements, module_structure
from dycl.rewriter.hook_effects import hook_refusal
from dycl.rewriter.hooks import forward_hooks, hook_functions, refuse_impure_hooks
from dycl.rewriter.inline import is_user_code
from dycl.rewriter.locations import LocationTable
from dycl.rewriter.names import Namespace
from dycl.rewriter.passes import Pass
from dycl.rewriter.pipeline import PIPELINE, run_passes
from dycl.rewriter.root_hooks import hooked_entry
from dycl.rewriter.scoped_bindings import refuse_scoped_reads
from dycl.rewriter.source import ParsedFunction, parse_function
from dycl.rewriter.state_prescan import prescan_state
from dycl.rewriter.state_slots import collect_state_writes
from dycl.rewriter.state_table import NOT_INPUTS
from dycl.rewriter.state_threading import ThreadedState, thread_state
from dycl.rewriter.state_writes import receiver_name
from dycl.rewriter.tensor_rows import reshapes_in_place
from dycl.rewriter.values import ModuleIndex, Static
from dycl.rewriter.verify import verify_printed
from dycl.rewriter.walk import all_names, bound_names
from dycl.rewriter.written_hooks import prescan_hooks, refuse_traced_hooks

__all__ = ["rewrite", "RewrittenFunction", "UnsupportedError", "SourceLocation", "PIPELINE", "FlatInput",
           "ReturnForm"]


def rewrite(model: torch.nn.Module, method: str = "forward", debug: bool = False,
            example: dict[str, Any] | None = None, returns: ReturnForm | None = None,
            passes: Sequence[type[Pass]] = PIPELINE, positional: int | None = None,
            followed: frozenset = frozenset(),
            static_sizes: Mapping[str, tuple[int | None, ...]] | None = None) -> RewrittenFunction:
    """Rewrite ``model.<method>`` (looked up as Python does: an instance
    attribute such as ``self.forward = self.early_exit`` wins) for this model.

    ``example`` maps each parameter the example passed to its value (an
    ``inspect.BoundArguments.arguments``); the rewritten function then takes one
    parameter per input of that call (``rewriter.arguments``). Literal values and
    parameters left at literal defaults (``max_len=20``, ``h=None``) are
    specialized. Without ``example``, every parameter without a literal default is
    an input. ``returns`` rewrites every ``return`` to give flat tensors (for an
    output with objects the host cannot build; ``rewriter.arguments.ReturnForm``).
    Raises ``UnsupportedError`` naming the construct and its file:line for code
    dycl cannot compile. ``passes`` replaces the pipeline (a golden test runs one
    pass alone; the result then carries no guarantee of the full pipeline). ``positional``:
    how many of the example's arguments were passed positionally; the model's own hooks
    (``rewriter.root_hooks``) are compiled only when it is given. ``followed``: the code of
    library functions to rewrite like user code (``dycl.model.library_decisions``). ``static_sizes``: per
    tensor parameter of ``example``, its size per dim where the compiled model checks it on every call
    (None where it is symbolic); a loop over such a tensor's rows unrolls to them (``rewriter.tensor_rows``).
    """
    with paused_collector():  # many short-lived libcst nodes (rewriter.collector)
        return _rewrite(model, method, debug, example, returns, passes, positional, followed, static_sizes or {})


def _rewrite(model: torch.nn.Module, method: str, debug: bool, example: dict[str, Any] | None,
             returns: ReturnForm | None, passes: Sequence[type[Pass]] = PIPELINE,
             positional: int | None = None, followed: frozenset = frozenset(),
             static_sizes: Mapping[str, tuple[int | None, ...]] | None = None) -> RewrittenFunction:
    resolved = resolve_method(model, method)
    if method == "forward":  # model(x) runs the class's own __call__, if it has one
        refuse_overridden_call(model)
    if resolved.owner is not model:
        raise UnsupportedError(f"{type(model).__qualname__}.{method}, set to a method of another module "
                               f"({type(resolved.owner).__qualname__})", None,
                               "compile that module itself, or assign a method of this model")
    written_hooks = refuse_impure_hooks(model, is_user_code, hook_refusal)
    located = None
    if method == "forward" and forward_hooks(model):  # model(...) runs the model's hooks around forward
        signature = signature_of(resolved, inspect.unwrap(resolved.function))
        resolved = hooked_entry(model, resolved, signature, example, positional)
    elif needs_entry(resolved):  # the wrapper is compiled as a callee (rewriter.decorated_entry)
        signature = signature_of(resolved, inspect.unwrap(resolved.function))
        located = entry_location(resolved)
        resolved = decorated_entry(model, resolved, signature, example, positional, method)
    namespace = Namespace()
    globals_table = GlobalTable(namespace)
    ctx = RewriteContext(model, namespace, LocationTable(), globals_table, debug=debug, followed=followed,
                         written_hooks=written_hooks)
    prescan_state(ctx)  # module state a method may write is never folded (rewriter.state_slots)
    prescan_hooks(ctx)  # and the state of the hooks written out as code (rewriter.written_hooks)
    parsed, flat, self_name = _entry(ctx, resolved, method, example, returns, located)
    if not reshapes_in_place(parsed.definition):
        ctx.input_sizes = {f.name: tuple(static_sizes[f.parameter]) for f in flat.inputs
                           if f.key is None and f.name == f.parameter and f.parameter in (static_sizes or {})}
    definition = parsed.definition
    env = Env()
    env.bind(self_name, Static(model, cst.Name(self_name)))
    for name, static in flat.statics.items():
        env.bind(name, static)
    index = ModuleIndex(model, cst.Name(self_name))
    body = run_passes(ctx, parsed, definition, env, index, inlined=False, passes=passes)
    if ctx.input_sizes and any(reshapes_in_place(p.definition) for p in ctx.caches.parsed.values()):
        # a helper may change an input's shape in place: its sizes are not the call's (rewriter.tensor_rows)
        return _rewrite(model, method, debug, example, returns, passes, positional, followed, {})
    refuse_traced_hooks(ctx, body, self_name)
    parsed_all = [parsed, *ctx.caches.parsed.values()]
    refuse_scoped_reads([v for p in parsed_all for v in p.scoped], [(p.definition, p.globals) for p in parsed_all],
                        hook_functions(model), ctx.locations.resolve)
    body, state = thread_state(ctx, body, self_name)
    header = definition.body.header.with_changes(whitespace=cst.SimpleWhitespace(""), comment=None)
    new_definition = definition.with_changes(
        body=definition.body.with_changes(body=distinct_statements(body), header=header),
        params=_with_state_parameters(definition.params, len(flat.inputs), state),
        decorators=[], leading_lines=[])
    source = cst.Module(body=[new_definition]).code
    if checks_enabled():
        verify_printed(new_definition, source)
    return RewrittenFunction(
        name=definition.name.value,
        qualname=f"{type(model).__qualname__}.{method}",
        source=source,
        definition=new_definition,
        globals=dict(globals_table.objects),
        signature=_signature_of(new_definition, flat.specialized),
        specialized=flat.specialized,
        locations=ctx.locations,
        module_structure=module_structure(model),
        trace=ctx.trace,
        inputs=tuple(flat.inputs),
        fixed=tuple(flat.fixed),
        absent=tuple(flat.absent),
        variadic=dict(flat.variadic),
        structures=dict(flat.structures),
        original_signature=inspect.signature(parsed.function),
        higher_order=any(p.higher_order for p in ctx.caches.parsed.values()),
        functions=tuple(dict.fromkeys([*ctx.caches.parsed, *ctx.caches.syntax_facts, *hook_functions(model)])),
        state=state,
        config_reads=ctx.config_reads.reads(),
    )


def _entry(ctx: RewriteContext, resolved: ResolvedMethod, method: str, example: dict[str, Any] | None,
           returns: ReturnForm | None, located: SourceLocation | None = None
           ) -> tuple[ParsedFunction, FlatParameters, str]:
    """The root function parsed, checked and flattened to one parameter per
    input, and the name of its ``self``; every name it uses is reserved, and
    the globals it reads are registered. ``located``: where a generated entry's
    statements are reported (``rewriter.decorated_entry``)."""
    namespace, globals_table = ctx.namespace, ctx.globals
    parsed = parse_function(resolved.function, ctx.locations)
    if located is not None:
        parsed = dataclasses.replace(parsed, definition=relocated(parsed.definition, ctx.locations, located))
    definition = parsed.definition
    params = definition.params.params or definition.params.posonly_params
    if not params:
        raise ctx.error(f"{method}() without a self parameter", None, location=parsed.location)
    for name in sorted(all_names(definition)):
        namespace.reserve(name)
    signature = signature_of(resolved, parsed.function, parsed.location)
    flat = flatten_parameters(definition, signature, example, namespace, globals_table)
    if returns is not None:
        flat.definition = flatten_returns(flat.definition, returns, namespace, globals_table)
    parsed = dataclasses.replace(parsed, definition=flat.definition)
    reject_unsupported(ctx, parsed.definition, receiver_name(parsed.function, parsed.definition) is not None)
    definition, markers = collect_state_writes(ctx, parsed.function, parsed.definition)
    if markers:  # refused where reached (rewriter.deferred_refusals)
        parsed = dataclasses.replace(parsed, definition=definition, imports={**parsed.imports, **markers})
    ctx.caches.parsed[parsed.function] = parsed
    names = all_names(parsed.definition)
    for name in sorted(names):
        namespace.reserve(name)
    for name in sorted(names - bound_names(parsed.definition)):
        if name in parsed.globals:
            globals_table.register_root(name, parsed.globals[name])
    return parsed, flat, params[0].name.value


def _with_state_parameters(params: cst.Parameters, inputs: int, state: tuple[ThreadedState, ...]) -> cst.Parameters:
    """``params`` with one parameter per threaded state slot after the inputs (before the specialized ones)."""
    if not state:
        return params
    listed = list(params.params)
    added = [cst.Param(cst.Name(s.parameter)) for s in state if s.kind not in NOT_INPUTS]  # started afresh
    return params.with_changes(params=[*listed[:1 + inputs], *added, *listed[1 + inputs:]])


def _signature_of(definition: cst.FunctionDef, specialized: dict[str, Any]) -> inspect.Signature:
    """The signature of the rewritten ``definition`` (plain parameters, literal defaults)."""
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    return inspect.Signature([
        inspect.Parameter(p.name.value, kind, default=specialized.get(p.name.value, inspect.Parameter.empty))
        for p in definition.params.params])

