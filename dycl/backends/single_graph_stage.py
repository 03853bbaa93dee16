"""The compiler's *lower* stage: the whole HCFG as one ONNX model, where the lever asks for it
and ``dycl.backends.single_graph`` can take the model (issue 29).

``Levers.single_graph``: "off" keeps the host's sub-DNN calls; "on" lowers every model it can;
"auto" (the default) lowers, emits both hosts and keeps the one graph unless the host is clearly
faster on the example and inputs derived from it (``dycl.backends.single_graph_choice``), except
where the choice cannot matter (``single_graph_choice.untimed``: one sub-DNN and no condition, a
tiny model), which keep the host without lowering. Either way ``stats["single_graph"]`` says what
was chosen and why.

The lowered model's host is the same generated program with one sub-DNN: the whole graph, called
once, then ``if path == k: return ...`` for each path (``lowered_graph``). Its inputs' checks,
the manifest's outputs (from the exploration) and the artifact's layout are unchanged, so the
in-process model and the torch-free host run it the same way. The graph's last output is each of
the model's conditions' outcome (``dycl.backends.single_graph_decisions``), which the host's
``FORWARD_DECISIONS`` (``hostgen.decisions``, built by ``decisions``) describes for coverage.

Assumes: the variants are compiled (``dycl.compiler.Compiled``). Guarantees: where anything is
not lowerable (``NotLowerable``: state, per-sample mode, another backend, a host operation the
graph cannot compute), the stage returns its input unchanged."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import libcst as cst
import numpy as np

from dycl.backends.base import CompiledVariant
from dycl.backends.onnx_compose import ELEM
from dycl.backends.single_graph import Lowered, NotLowerable, lower
from dycl.backends.single_graph_choice import choose, timing_inputs, untimed
from dycl.backends.single_graph_decisions import Numbering, skeleton
from dycl.backends.thread_choice import on_calling_thread
from dycl.hcfg.graph import HCFG, Cond, Return, SubDNN
from dycl.hcfg.ports import Layout, Port, Variant
from dycl.hostgen.decisions import Decisions
from dycl.rewriter.locations import comment_of

if TYPE_CHECKING:
    from dycl.compiler import Compiled, CompileResult

FILE = "single_graph.onnx"
#: the order "auto" prefers its candidates in, within the timing's margin (``single_graph_choice``):
#: the one graph on the calling thread, in a pool, then the host
PREFERENCE = (1, 2, 0)
_DTYPE = {elem: name for name, elem in ELEM.items()}


def lower_stage(compiled: Compiled, emit: Callable[[Compiled], CompileResult]) -> Compiled:
    """``compiled`` with the whole graph as one ONNX model where the lever asks and it can be lowered;
    ``emit`` (the compiler's next stage) makes the hosts ``auto`` times."""
    stage = compiled.ported.explored.stage
    job = stage.front.job
    mode = job.options.levers.single_graph
    stats: dict[str, Any] = {"mode": mode, "chosen": "host"}
    compiled.backend_stats["single_graph"] = stats
    if mode == "off":
        return compiled
    try:
        _refuse_others(compiled)
        reason = _untimed(compiled) if mode == "auto" else None
        if reason is not None:
            stats["reason"] = reason
            return compiled
        # "auto" times the one graph on both thread settings and runs it then: no checks of its own
        lowered, lowered_compiled = lowered_variant(compiled, checked=mode != "auto")
    except NotLowerable as refusal:
        stats["reason"] = str(refusal)
        return compiled
    stats.update(lowered.stats)
    stats["chosen"] = "single_graph"
    stats["host_sub_dnns"] = len(stage.graph.sub_dnns)
    stats["on_calling_thread"] = next(iter(lowered_compiled.variants.values())).on_calling_thread
    lowered_compiled.backend_stats["single_graph"] = stats
    if mode == "auto":
        return _faster(compiled, lowered_compiled, stats, emit)
    return lowered_compiled


def _refuse_others(compiled: Compiled) -> None:
    """What the lowering never takes, before it looks at the graph."""
    front = compiled.ported.explored.stage.front
    job = front.job
    if job.backend.file_suffix != ".onnx" or not job.backend.standalone or job.backend.name != "onnxruntime":
        raise NotLowerable(f"the {job.backend.name} backend")
    if job.options.per_sample:
        raise NotLowerable("per-sample batching")
    if front.rewritten.state or front.written_inputs:
        raise NotLowerable("module state or inputs written in place")
    if compiled.ported.explored.stage.constants:
        raise NotLowerable("constants hoisted to the host")


def _untimed(compiled: Compiled) -> str | None:
    """Why "auto" keeps the host untimed (``single_graph_choice.untimed``), from each sub-DNN's first variant."""
    ported = compiled.ported
    graph = ported.explored.stage.graph
    first: dict[int, Variant] = {}
    for variant in ported.variants:
        first.setdefault(variant.sub.index, variant)
    graphs = [(compiled.variants[v.name].data, {p.name: tuple(np.shape(e)) for p, e in zip(v.inputs, v.examples[0])})
              for v in first.values()]
    return untimed(len(graph.sub_dnns), len(graph.conditions), graphs)


def lowered_variant(compiled: Compiled, checked: bool = True) -> tuple[Lowered, Compiled]:
    """The lowering of ``compiled``'s graph, and ``compiled`` with it as its one sub-DNN; ``checked``:
    run once on the example (``NotLowerable`` where ONNX Runtime cannot) and its thread setting chosen
    by ``dycl.backends.thread_choice``, else on the calling thread and not run here."""
    from dycl.artifact.manifest_build import input_ports

    ported = compiled.ported
    explored = ported.explored
    stage, front = explored.stage, explored.stage.front
    inputs = input_ports(front.rewritten, front.example_args, explored.shapes, explored.symbolic_inputs)
    names = _Names(stage.graph)
    lowered = lower(stage.graph, inputs, ported.variants, compiled.variants, names.outputs)
    graph = lowered_graph(stage.graph, lowered, names)
    whole = graph.sub_dnns[0]
    ports_in = tuple(Port(p.name, "tensor", p.dtype, tuple(p.shape)) for p in inputs)
    slots = len(lowered.slot_types)
    ports_out = (*(Port(name, "tensor", _DTYPE[elem], ()) for name, elem in zip(whole.outputs, lowered.slot_types)),
                 Port(names.path, "int", "int64", ()), Port(names.decisions, "tensor", "int64", (lowered.conditions,)))
    assert len(ports_out) == len(whole.outputs) == slots + 2
    leaf = Layout(None, ("tensor",))
    example = tuple(front.example_args[:len(inputs)])
    variant = Variant(whole, (), ports_in, ports_out, (example,), (leaf,) * len(ports_in), (leaf,) * len(ports_out))
    feeds = {p.name: value for p, value in zip(inputs, example)}
    caller = True
    if checked:
        _loads(lowered.model, feeds)
        caller = on_calling_thread(lowered.model, feeds)
    made = CompiledVariant(FILE, lowered.model, on_calling_thread=caller)
    explored = dataclasses.replace(explored, stage=dataclasses.replace(stage, graph=graph))
    # the module of an entry runs only on a backend that is not standalone, which is never lowered
    modules = {**ported.modules, variant.name: next(iter(ported.modules.values()))}
    new_ported = dataclasses.replace(ported, explored=explored, variants=[variant], modules=modules,
                                     distinct={variant.name: variant})
    return lowered, dataclasses.replace(compiled, ported=new_ported, variants={variant.name: made},
                                        backend_stats=dict(compiled.backend_stats),
                                        decisions=decisions(stage.graph, names.decisions, front.rewritten))


def _loads(model: bytes, feeds: dict[str, Any]) -> None:
    """Refuse (``NotLowerable``, with ONNX Runtime's words) a composed model its runtime cannot load or run
    on the example: the host it would replace can."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1  # no pool (and no spinning threads) for one run
    try:
        session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        session.run(None, {name: value.numpy() for name, value in feeds.items()})
    except Exception as error:  # noqa: BLE001 - ONNX Runtime raises several types; each means "not this graph"
        raise NotLowerable(f"ONNX Runtime cannot run the composed graph: {type(error).__name__}: {error}") from error


class _Names:
    """The host names of the lowered graph's outputs, clear of the model's parameters."""

    def __init__(self, graph: HCFG) -> None:
        taken = set(graph.parameters)
        self.stem = "single"
        while any(name.startswith(self.stem) for name in taken):
            self.stem = "_" + self.stem
        self.path = f"{self.stem}_path"
        self.decisions = f"{self.stem}_decisions"
        self.index = 1 + max((sub.index for sub in graph.sub_dnns), default=-1)

    def outputs(self, slots: int) -> list[str]:
        return [f"{self.stem}_out_{i}" for i in range(slots)] + [self.path, self.decisions]


def decisions(graph: HCFG, variable: str, rewritten: Any) -> Decisions:
    """What the lowered host reports of ``graph``'s conditions (``hostgen.decisions``), its outcomes in ``variable``."""
    conditions = tuple((_where(cond.statement), _test(cond.test)) for cond in graph.conditions)
    code = []
    for cond in graph.conditions:
        location = rewritten.locations.resolve(cond.statement)
        code.append(location.source_line().strip() if location else "")
    return Decisions(variable, conditions, skeleton(graph.body, Numbering(graph)), tuple(code))


def _where(statement: cst.CSTNode) -> str:  # as the host form's FORWARD_LINES has it (hostgen.emit)
    comment = comment_of(statement)
    return comment.value.removeprefix("#").strip() if comment is not None else ""


def _test(test: cst.BaseExpression) -> str:
    return cst.Module([]).code_for_node(test)


def lowered_graph(graph: HCFG, lowered: Lowered, names: _Names) -> HCFG:
    """The host's graph: the whole model as one sub-DNN, then the return of the path it took."""
    outputs = tuple(names.outputs(len(lowered.slot_types)))
    statements = tuple(s for sub in graph.sub_dnns for s in sub.statements)
    whole = SubDNN(names.index, statements, tuple(graph.parameters), outputs)
    groups: dict[str, list[int]] = {}  # paths that return the same expression share one return
    for number, (_, tree) in enumerate(lowered.paths):
        groups.setdefault(_expression(tree, outputs), []).append(number)
    block: tuple = ()
    for text, numbers in reversed(list(groups.items())):
        node = lowered.paths[numbers[0]][0]
        value = cst.parse_expression(text)
        returned = Return(node.statement.with_changes(body=[cst.Return(value)]), value)
        if not block:
            block = (returned,)
            continue
        test = cst.parse_expression(f"{names.path} == {numbers[0]}" if len(numbers) == 1
                                    else f"{names.path} in {tuple(numbers)}")
        comment = comment_of(node.statement)
        header = cst.TrailingWhitespace(comment=comment) if comment is not None else cst.TrailingWhitespace()
        statement_if = cst.If(test, cst.IndentedBlock([cst.SimpleStatementLine([cst.Pass()])], header=header))
        block = (Cond(numbers[0], statement_if, test, (returned,), block),)
    return graph.with_body((whole, *block))


def _expression(tree: Any, names: tuple[str, ...]) -> str:
    kind = tree[0]
    if kind == "slot":
        return names[tree[1]] + (".item()" if tree[2] is not None else "")
    if kind == "static":
        return repr(tree[1])
    items = [_expression(child, names) for child in tree[1]]
    if kind == "list":
        return "[" + ", ".join(items) + "]"
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _faster(host: Compiled, single: Compiled, stats: dict[str, Any],
            emit: Callable[[Compiled], CompileResult]) -> Compiled:
    """The host, or the one graph on the calling thread or in a pool, as
    ``dycl.backends.single_graph_choice`` keeps (timed side by side on the example and inputs
    derived from it)."""
    from dycl.artifact import host_model

    front = host.ported.explored.stage.front
    (name, made), = single.variants.items()
    other = dataclasses.replace(single, variants={name: dataclasses.replace(
        made, on_calling_thread=not made.on_calling_thread)})
    candidates = [host, single, other]  # single runs on the calling thread ("auto" lowers it unchecked)
    try:
        results = [emit(candidate) for candidate in candidates]
        models = [host_model(result.host_source, result.manifest, result.files) for result in results]
        choice = choose(models, timing_inputs(front.example_args, models[0], results[0].program), PREFERENCE)
    except Exception as error:  # noqa: BLE001 - timing is advice: the host stays, the reason is recorded
        stats["chosen"], stats["reason"] = "host", f"timing failed: {type(error).__name__}: {error}"
        host.backend_stats["single_graph"] = stats
        return host
    stats.update(choice.stats())
    stats["single_graph_us_by_thread"] = {
        "calling thread" if candidate.variants[name].on_calling_thread else "pool": round(us, 1)
        for candidate, us in zip(candidates[1:], choice.us[1:])}
    kept = candidates[choice.kept]
    if choice.kept:
        stats["on_calling_thread"] = kept.variants[name].on_calling_thread
    else:
        stats["chosen"] = "host"
    kept.backend_stats["single_graph"] = stats
    return _reused(kept, results[choice.kept], models[choice.kept])


def _reused(kept: Compiled, result: CompileResult, model: Any) -> Compiled:
    """``kept``, carrying its emitted ``result`` and the host ``model`` timed from it: the emit stage returns
    that result and ``dycl.api.from_result`` runs that model (its sessions), instead of emitting and loading
    the same host again. What the timing left in it (sessions specialized to the example's sizes,
    ``dycl.backends.ort_runtime``) is what its first calls would leave."""
    result.loaded = model
    return dataclasses.replace(kept, emitted=result)


__all__ = ["FILE", "lower_stage", "lowered_graph", "lowered_variant"]
