"""Program rewriting (paper §5.2): make a dynamic ``forward()`` loop-free and
constant-folded, so that every sub-DNN between two data-dependent branches is a
fixed computation.

Parsing a function first desugars ``torch.cond``/``map``, nested functions and lambdas
into plain code (``rewriter.higher_order``). The passes, in order (``rewriter.pipeline.PASSES``):

1. normalize  — drop docstrings, splice ``with torch.no_grad():`` bodies
2. unroll     — unroll loops with static trip counts; break/continue become if/else
3. inline     — inline helper methods and submodules that still branch on data
4. constprop  — substitute and fold static values; drop ``if``s with static tests
5. structure  — ``elif`` and early ``return`` become nested if/else

``rewrite(model, debug=True)`` keeps the source after every pass in ``.trace``.
"""

from __future__ import annotations

import dataclasses
import gc
import inspect
from typing import Any

import libcst as cst
import torch
from dycl.rewriter.arguments import FlatInput, ReturnForm, flatten_parameters, flatten_returns
from dycl.rewriter.check import reject_unsupported
from dycl.rewriter.context import GlobalTable, RewriteContext
from dycl.rewriter.errors import SourceLocation, UnsupportedError
from dycl.rewriter.flow import Env, local_names
from dycl.rewriter.forward import resolve_method, signature_of
from dycl.rewriter.function import RewrittenFunction, module_structure
from dycl.rewriter.locations import LocationTable
from dycl.rewriter.names import Namespace
from dycl.rewriter.pipeline import PASSES, run_passes
from dycl.rewriter.source import parse_function
from dycl.rewriter.state_writes import reject_state_writes
from dycl.rewriter.values import ModuleIndex, Static

__all__ = ["rewrite", "RewrittenFunction", "UnsupportedError", "SourceLocation", "PASSES", "FlatInput", "ReturnForm"]


def rewrite(model: torch.nn.Module, method: str = "forward", debug: bool = False,
            example: dict[str, Any] | None = None, returns: ReturnForm | None = None) -> RewrittenFunction:
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
    dycl cannot compile.
    """
    # Note: the rewriter allocates many short-lived libcst nodes and no cycles
    # worth collecting; pausing the cyclic GC makes it about 1.5x faster.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _rewrite(model, method, debug, example, returns)
    finally:
        if gc_was_enabled:
            gc.enable()


def _rewrite(model: torch.nn.Module, method: str, debug: bool, example: dict[str, Any] | None,
             returns: ReturnForm | None) -> RewrittenFunction:
    resolved = resolve_method(model, method)
    if resolved.owner is not model:
        raise UnsupportedError(f"{type(model).__qualname__}.{method}, set to a method of another module "
                               f"({type(resolved.owner).__qualname__})", None,
                               "compile that module itself, or assign a method of this model")
    function = resolved.function
    locations = LocationTable()
    namespace = Namespace()
    globals_table = GlobalTable(namespace)
    probe = RewriteContext(model, ModuleIndex(model, cst.Name("self")), namespace, locations, globals_table,
                           debug=debug)
    parsed = parse_function(function, locations)
    definition = parsed.definition
    params = definition.params.params or definition.params.posonly_params
    if not params:
        raise probe.error(f"{method}() without a self parameter", None, location=parsed.location)
    for name in sorted(_all_names(definition)):
        namespace.reserve(name)
    signature = signature_of(resolved, parsed.function, parsed.location)
    flat = flatten_parameters(definition, signature, example, namespace, globals_table)
    if returns is not None:
        flat.definition = flatten_returns(flat.definition, returns, namespace, globals_table)
    parsed = dataclasses.replace(parsed, definition=flat.definition)
    reject_unsupported(probe, parsed.definition)
    reject_state_writes(probe, parsed.function, parsed.definition)
    probe.parsed[parsed.function] = parsed
    definition = parsed.definition
    self_name = params[0].name.value
    ctx = probe
    if self_name != "self":
        ctx.index = ModuleIndex(model, cst.Name(self_name))

    for name in sorted(_all_names(definition)):
        namespace.reserve(name)
    locals_ = local_names(definition)
    for name in sorted(_all_names(definition) - locals_):
        if name in parsed.globals:
            globals_table.register_root(name, parsed.globals[name])

    env = Env()
    env.bind(self_name, Static(model, cst.Name(self_name)))
    for name, static in flat.statics.items():
        env.bind(name, static)

    body = run_passes(ctx, parsed, definition, env, inlined=False)
    header = definition.body.header.with_changes(whitespace=cst.SimpleWhitespace(""), comment=None)
    new_definition = definition.with_changes(body=definition.body.with_changes(body=body, header=header),
                                             decorators=[], leading_lines=[])
    source = cst.Module(body=[new_definition]).code
    signature = _signature_of(new_definition, flat.specialized)
    return RewrittenFunction(
        name=definition.name.value,
        qualname=f"{type(model).__qualname__}.{method}",
        source=source,
        globals=dict(globals_table.objects),
        signature=signature,
        specialized=flat.specialized,
        locations=locations,
        module_structure=module_structure(model),
        trace=ctx.trace,
        inputs=tuple(flat.inputs),
        fixed=tuple(flat.fixed),
        absent=tuple(flat.absent),
        variadic=dict(flat.variadic),
        original_signature=inspect.signature(parsed.function),
        higher_order=any(p.higher_order for p in ctx.parsed.values()),
    )


def _signature_of(definition: cst.FunctionDef, specialized: dict[str, Any]) -> inspect.Signature:
    """The signature of the rewritten ``definition`` (plain parameters, literal defaults)."""
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    return inspect.Signature([
        inspect.Parameter(p.name.value, kind, default=specialized.get(p.name.value, inspect.Parameter.empty))
        for p in definition.params.params])


def _all_names(node: cst.CSTNode) -> set[str]:
    names: set[str] = set()

    class Names(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            names.add(name.value)

    node.visit(Names())
    return names
