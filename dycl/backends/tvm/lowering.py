"""One sub-DNN from ONNX bytes to a shared library: import into Relax, the CPU
pipeline's passes, schedules (and cached tuned schedules), LLVM, ``export_library``."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from dycl.backends.tvm.forced_dims import pinned
from dycl.backends.tvm.options import TvmOptions, target_of
from dycl.backends.tvm.schedules import apply_schedules
from dycl.backends.tvm.tuned import apply_tuned


def import_onnx(onnx_bytes: bytes, input_names: Sequence[str]):
    """The Relax module of an exported sub-DNN; its parameters are named
    ``in<position>`` after the port they take (the exporter drops unused inputs).

    The dims the graph pins are made static, and dim names it requires equal one
    name, first (``forced_dims``). Where TVM's ONNX frontend fails, the graph is
    constant-folded by ONNX Runtime's basic (ONNX-standard) optimizations and
    imported again: that removes Shape/Gather chains the frontend mishandles (see
    ``tuning_problems``)."""
    import warnings

    import onnx
    from tvm.relax.frontend.onnx import from_onnx

    model = onnx.load_model_from_string(onnx_bytes)
    positions = {name: i for i, name in enumerate(input_names)}
    initializers = {t.name for t in model.graph.initializer}
    renamed = {i.name: f"in{positions[i.name]}" for i in model.graph.input if i.name not in initializers}
    _rename_values(model.graph, renamed)
    # a dim named symbolic that the weights pin (``dynamic="all"`` over a Linear's in-features), or two names
    # a Concat requires equal, leave the importer values of unknown shape: make them static or one name
    model = pinned(model) or model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return from_onnx(model, keep_params_in_input=False)
        except Exception as error:
            try:
                return from_onnx(_folded(model), keep_params_in_input=False)
            except Exception:
                raise RuntimeError(f"TVM cannot import this sub-DNN's ONNX graph: {error}{_hint(model)}") from error


def _hint(model) -> str:
    """What to try where the graph's inputs have symbolic dims (the importer lost a value's shape)."""
    names = sorted({d.dim_param for value in model.graph.input for d in value.type.tensor_type.shape.dim
                    if d.HasField("dim_param")})
    if not names:
        return ""
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return (f" (its inputs have symbolic dims {shown}, and TVM's importer may not relate a value computed from "
            "them: compile with fewer symbolic dims (dynamic= naming only those that vary, or dynamic=False) "
            "or with backend='onnxruntime')")


def _folded(model):
    """``model`` after ONNX Runtime's basic graph optimizations (constant folding,
    shapes of statically shaped tensors, no contrib operators)."""
    import onnx
    import onnxruntime as ort

    with tempfile.TemporaryDirectory(prefix="dycl-tvm-") as scratch:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = os.path.join(scratch, "folded.onnx")
        # only folds and writes the graph: no pool, so nothing of it spins next to the caller's torch
        options.intra_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        return onnx.load(options.optimized_model_filepath)


def _rename_values(graph, renamed: dict[str, str]) -> None:
    import onnx

    for value in (*graph.input, *graph.output):
        value.name = renamed.get(value.name, value.name)
    for node in graph.node:
        for i, name in enumerate(node.input):
            node.input[i] = renamed.get(name, name)
        for i, name in enumerate(node.output):
            node.output[i] = renamed.get(name, name)
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                _rename_values(attribute.g, renamed)
            for subgraph in attribute.graphs:
                _rename_values(subgraph, renamed)


def prepare(mod, target):
    """Legalize and fuse (the CPU pipeline's first half): one PrimFunc per fused kernel."""
    import tvm
    from tvm import relax

    passes = [
        relax.backend.DispatchSampling(),
        relax.backend.DispatchSortScan(),
        relax.transform.LegalizeOps(),
        relax.transform.AnnotateTIROpPattern(),
        relax.transform.FoldConstant(),
        relax.transform.FuseOps(),
        relax.transform.FuseTIR(),
    ]
    with target:
        return tvm.transform.Sequential(passes)(mod)


def finish(mod, target):
    """The CPU pipeline's second half: lower dataflow, plan memory, VM calls."""
    import tvm
    from tvm import relax

    passes = [
        relax.transform.RewriteDataflowReshape(),
        relax.transform.ToNonDataflow(),
        relax.transform.RemovePurityChecking(),
        relax.transform.CallTIRRewrite(),
        relax.transform.StaticPlanBlockMemory(),
        relax.transform.LowerAllocTensor(),
        relax.transform.KillAfterLastUse(),
        relax.transform.LowerRuntimeBuiltin(),
        relax.transform.ComputePrimValue(),
        relax.transform.VMShapeLower(),
        relax.transform.AttachGlobalSymbol(),
    ]
    with target:
        return tvm.transform.Sequential(passes)(mod)



def build_library(onnx_bytes: bytes, input_names: Sequence[str], options: TvmOptions) -> bytes:
    from tvm import relax

    target = target_of(options)
    mod = import_onnx(onnx_bytes, input_names)
    if options.schedule == "none":
        executable = relax.build(mod, target)
    else:
        mod = prepare(mod, target)
        if options.tune_trials > 0:
            mod = apply_tuned(mod, target, options)
        try:
            scheduled = apply_schedules(_copy(mod), target, options.schedule)
            executable = relax.build(finish(scheduled, target), target, relax_pipeline=None)
        except Exception:  # noqa: BLE001 - a schedule that does not apply or build: find it
            scheduled = schedule_kernel_by_kernel(mod, target, options.schedule)
            executable = relax.build(finish(scheduled, target), target, relax_pipeline=None)
    with tempfile.TemporaryDirectory(prefix="dycl-tvm-") as scratch:
        path = os.path.join(scratch, "lib.so")
        executable.export_library(path)
        return Path(path).read_bytes()


def schedule_kernel_by_kernel(mod, target, schedule: str):
    """``mod`` with each kernel scheduled on its own; a kernel whose schedule fails to
    apply or to build (the rules and LLVM codegen have gaps: symbolic extents, vectors
    of bools) keeps its unscheduled, serial form, which always builds."""
    import tvm

    result = _copy(mod)
    for global_var, func in mod.functions_items():
        if not isinstance(func, tvm.tirx.PrimFunc) or (func.attrs and func.attrs.get("tirx.is_scheduled")):
            continue
        try:
            alone = apply_schedules(tvm.IRModule({global_var: func}), target, schedule)
            tvm.tirx.build(alone, target=target)
        except Exception:  # noqa: BLE001 - this kernel stays unscheduled
            continue
        result[global_var] = alone[global_var]
    return result


def _copy(mod):
    import tvm

    return tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs)
