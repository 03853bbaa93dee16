"""Program rewriting (paper §5.2): make a dynamic ``forward()`` loop-free and
constant-folded, so that every sub-DNN between two data-dependent branches is a
fixed computation.

The passes, in order (``rewriter.pipeline.PASSES``):

1. normalize  — drop docstrings, splice ``with torch.no_grad():`` bodies
2. unroll     — unroll loops with static trip counts; break/continue become if/else
3. inline     — inline helper methods and submodules that still branch on data
4. constprop  — substitute and fold static values; drop ``if``s with static tests
5. structure  — ``elif`` and early ``return`` become nested if/else

``rewrite(model, debug=True)`` keeps the source after every pass in ``.trace``.
"""

from __future__ import annotations

import functools
import gc
import inspect

import libcst as cst
import torch

from rewriter.context import GlobalTable, RewriteContext
from rewriter.errors import SourceLocation, UnsupportedError
from rewriter.flow import Env, local_names
from rewriter.forward import resolve_method
from rewriter.function import RewrittenFunction, module_structure
from rewriter.locations import LocationTable
from rewriter.names import Namespace
from rewriter.pipeline import PASSES, parse_checked, run_passes
from rewriter.values import ModuleIndex, Static, is_literal, literal_term

__all__ = ["rewrite", "RewrittenFunction", "UnsupportedError", "SourceLocation", "PASSES"]


def rewrite(model: torch.nn.Module, method: str = "forward", debug: bool = False) -> RewrittenFunction:
    """Rewrite ``model.<method>`` (looked up as Python does: an instance
    attribute such as ``self.forward = self.early_exit`` wins) for this model.

    Parameters with literal default values (``max_len=20``, ``h=None``) are
    specialized to those defaults. Raises ``UnsupportedError`` naming the
    construct and its file:line for code dycl cannot compile.
    """
    # Note: the rewriter allocates many short-lived libcst nodes and no cycles
    # worth collecting; pausing the cyclic GC makes it about 1.5x faster.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _rewrite(model, method, debug)
    finally:
        if gc_was_enabled:
            gc.enable()


def _rewrite(model: torch.nn.Module, method: str, debug: bool) -> RewrittenFunction:
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
    parsed = parse_checked(probe, function)
    definition = parsed.definition
    params = definition.params.params
    if not params:
        raise probe.error(f"{method}() without a self parameter", None, location=parsed.location)
    if isinstance(definition.params.star_arg, cst.Param) or definition.params.star_kwarg is not None:
        raise probe.error("a *args/**kwargs parameter", None, "list the parameters explicitly",
                          location=parsed.location)
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
    signature = _signature(parsed.function, resolved.keywords, parsed.location)
    specialized = {}
    for param in list(signature.parameters.values())[1:]:
        if param.default is not inspect.Parameter.empty and is_literal(param.default):
            specialized[param.name] = param.default
            env.bind(param.name, Static(param.default, literal_term(param.default)))

    body = run_passes(ctx, parsed, definition, env, inlined=False)
    header = definition.body.header.with_changes(whitespace=cst.SimpleWhitespace(""), comment=None)
    new_definition = definition.with_changes(body=definition.body.with_changes(body=body, header=header),
                                             decorators=[], leading_lines=[])
    source = cst.Module(body=[new_definition]).code
    return RewrittenFunction(
        name=definition.name.value,
        qualname=f"{type(model).__qualname__}.{method}",
        source=source,
        globals=dict(globals_table.objects),
        signature=signature,
        specialized=specialized,
        locations=locations,
        module_structure=module_structure(model),
        trace=ctx.trace,
    )


def _signature(function, keywords: dict, location: SourceLocation) -> inspect.Signature:
    """``function``'s signature with the keywords a ``functools.partial`` forward binds as defaults."""
    signature = inspect.signature(function)
    if not keywords:
        return signature
    for name, value in keywords.items():
        if not is_literal(value):
            raise UnsupportedError(f"a functools.partial forward binding {name}={value!r:.40}", location,
                                   "bind only numbers, strings, booleans or None with partial")
    first, *rest = signature.parameters.values()
    bound = inspect.signature(functools.partial(function, None, **keywords))
    return signature.replace(parameters=[first, *bound.parameters.values()])


def _all_names(node: cst.CSTNode) -> set[str]:
    names: set[str] = set()

    class Names(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            names.add(name.value)

    node.visit(Names())
    return names
