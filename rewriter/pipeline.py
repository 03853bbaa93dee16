"""The pass pipeline for one function body (the root ``forward`` or a callee to inline).

``PIPELINE`` lists the passes in order; each is a class of the shape
``passes.Pass`` (a ``name``, a one-line ``description``, a constructor taking
the ``FunctionUnit``, ``run(body) -> body``). ``run_passes`` runs a list of
them over one body and, for the full pipeline, checks the rewriter's
guarantees (``verify``); any other list (a golden test running one pass
alone) is run on the given body only: a callee that ``Inline`` splices in
always gets the full pipeline, whose guarantees ``Inline`` assumes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import libcst as cst
from dycl.rewriter.asserts import Asserts
from dycl.rewriter.callees import rewrite_callee
from dycl.rewriter.choices import Choices
from dycl.rewriter.constprop import ConstantPropagation
from dycl.rewriter.context import RewriteContext
from dycl.rewriter.dict_displays import DictDisplays
from dycl.rewriter.exits import Block
from dycl.rewriter.flow import Env, StaticFlow
from dycl.rewriter.inline import Callee, Inline, InlinedBody
from dycl.rewriter.normalize import Normalize
from dycl.rewriter.passes import FunctionUnit, Pass
from dycl.rewriter.source import ParsedFunction
from dycl.rewriter.structure import Structure
from dycl.rewriter.super_calls import ResolveSuper
from dycl.rewriter.unroll import Unroll
from dycl.rewriter.values import ModuleIndex
from dycl.rewriter.verify import verify
from dycl.rewriter.walk import bound_names

PIPELINE: tuple[type[Pass], ...] = (
    Normalize,            # drop docstrings, splice `with torch.no_grad():` bodies
    Asserts,              # `assert t, m` becomes `if not (t): raise AssertionError(m)`
    Unroll,               # unroll loops with static trip counts; break/continue become if/else
    Choices,              # data-dependent choices (a if c else b, lo < m < hi, heads[i](x)) become ifs
    ResolveSuper,         # super().m(...) becomes Parent.m(self, ...)  (issue 27)
    Inline,               # inline helpers and submodules that still branch on data
    ConstantPropagation,  # substitute and fold static values; drop ifs with static tests
    DictDisplays,         # a dict display read only at literal keys and by ** becomes one variable per key
    Structure,            # elif and early returns become nested if/else
)


def run_passes(ctx: RewriteContext, parsed: ParsedFunction, definition: cst.FunctionDef, env: Env,
               index: ModuleIndex, inlined: bool, passes: Sequence[type[Pass]] = PIPELINE,
               input_sizes: Mapping[str, tuple[int | None, ...]] | None = None) -> Block:
    """Rewrite ``definition`` (whose locals are already hygienic) under ``env``
    with ``passes``; ``index`` finds the modules its receiver reaches;
    ``inlined`` bodies get every ``return`` at the end of its path; ``input_sizes``: a callee's
    parameters that are the root's inputs (``FunctionUnit.input_sizes``), the root's own by default."""
    flow = StaticFlow(ctx, bound_names(definition), parsed.globals, index)

    def run_callee(callee_parsed: ParsedFunction, callee_definition: cst.FunctionDef, callee_env: Env,
                   callee_index: ModuleIndex, callee_sizes: Mapping[str, tuple[int | None, ...]]) -> Block:
        return run_passes(ctx, callee_parsed, callee_definition, callee_env, callee_index, True,
                          input_sizes=callee_sizes)

    def inline_callee(callee: Callee, call_site: cst.BaseStatement) -> InlinedBody | None:
        return rewrite_callee(ctx, callee, call_site, index, run_callee)

    sizes = (ctx.input_sizes if not inlined else {}) if input_sizes is None else input_sizes
    unit = FunctionUnit(ctx, parsed, definition, flow, env, inlined, inline_callee, sizes)
    body: Block = list(definition.body.body)
    for pass_ in passes:
        body = pass_(unit).run(body)
        ctx.record(pass_.name, parsed.function, body)
    if tuple(passes) == PIPELINE:
        verify(unit, body)
    return body
