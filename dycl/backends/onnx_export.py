"""Export of one sub-DNN variant to ONNX, checked so that nothing is baked in.

A sub-DNN has no control flow of its own, but the code it calls (library
functions, opaque helpers and submodules) may still turn a tensor into a Python
value; the tracing exporter then records that value as a constant, silently.
Three guards, each turning a silent freeze into ``UnsupportedError``:

1. ``Tensor.data`` is exported as ``detach()``: the TorchScript tracer does
   not record ``.data`` and would cut the graph there (the DyCL authors'
   BlockDrop tests ``action.data.sum() == 0``); ``detach()`` has the same value
   and is recorded.
2. Python reads of tensors while exporting (``hcfg.decisions``; shapes are
   tensors while tracing, so ``range(x.shape[0])`` is one), where the variant
   has symbolic dims or scalar inputs or computes a size from values
   (``sizes_from_data``: ``x[x > 0]``, whatever ``dynamic=`` says), and the
   tracer's own warnings (``TracerWarning``: a tensor converted to a Python
   bool/number/index, or — where the variant has symbolic dims — iterated or
   measured with ``len()``) become ``UnsupportedError`` at the file:line that
   made the conversion (library or user code; a line of the sub-DNN itself is
   mapped to the user's statement). One exception: where
   every such read is a ``bool()`` and the caller collects guards, the sub-DNN
   is run once more on fake tensors with symbolic sizes (``dycl.export.shape_guards``);
   if that run needs no tensor value, the conditions on the sizes that keep each
   decision are handed to the host, which checks them on every call. Another:
   where every read is of a value computed from shapes only (``hcfg.traced_shapes``:
   ``np.array([[start]] * x.size(0))``), the graph is pinned to the example's
   sizes (``size_pins``: a guard per symbolic dim, a ``SpecialisationWarning``). Warnings
   the tracer raises inside torch are ignored, as torch itself does (its shape
   checks). Any other warning is re-emitted to the caller, never filtered out.
3. After export, every output the eager run computes from an input's values
   (taint tracking over torch functions, ``dependences``) must be computed from
   that input in the graph too. The exporter drops inputs the graph does not
   use, which is right when the statements read only their metadata (shape,
   dtype) and the variant fixes it; an output cut off from an input it depends
   on (a dropped input, or a ``Constant`` in its place) is a lost input:
   ``UnsupportedError`` naming the statement that computes it.

Note: why the TorchScript-based exporter. PyTorch deprecates it (``dynamo=False``)
in favour of the torch.export-based one; dycl keeps it for now. torch's
``DeprecationWarning`` about it concerns dycl's choice, not the user's code, so it is
caught here (``warnings.catch_warnings`` around dycl's own call, no global filter) and
said once per compile at INFO on the ``dycl.export`` logger (``EXPORTER_NOTE``; the
README's docs/ pages say it too) instead of a ``FutureWarning`` the user can do
nothing about. Measured with torch 2.13 / onnxscript 0.7.2 on this
project's 2-core CI machine under load (``benchmarks/exporters.py``):

- export time: a 3-layer MLP sub-DNN with a symbolic batch takes 0.11 s with
  ``dynamo=False`` and 20.4 s with ``dynamo=True`` (warm; the first call 2.9 s
  vs 82 s); the zoo's BlockDrop has 59 distinct sub-DNNs, SkipNet 35.
- failures: on the ``.data`` condition sub-DNN of the issue the torch.export
  exporter falls back from non-strict to strict export and then kills the
  process with SIGSEGV in ``run_decompositions`` (no Python error to catch).
  On SkipNet-FF and BlockDrop its graphs fail the dataflow check below (on
  SkipNet a downsample sub-DNN, ``prev = self.ds_layers[...](prev)``, whose
  output the graph does not compute from ``prev``; whether the graph or the
  check's reading of it is at fault was not investigated); with the
  TorchScript exporter both compile and agree with eager on 10 of 10 inputs.
- the fuzzer (``--fuzz 8 --seed 5``): 7.4 s per program and 0 unsupported with
  ``dynamo=False``; 79.3 s per program and 2 of 8 refused by the dataflow check
  with ``dynamo=True`` (0 inconsistencies either way).
- ``forward(*inputs)`` needs ``dynamic_shapes`` nested per varargs parameter,
  and an example dim of size 1 is specialized unless marked ``Dim.DYNAMIC``.

``export_onnx(..., dynamo=True)`` is kept for re-measuring with newer releases.
"""

from __future__ import annotations

import io
import os
import warnings
from typing import Any

import libcst as cst
import onnx
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from dycl.backends.export_errors import exporter_error, tracer_lacks_op
from dycl.backends.onnx_empty_reductions import pad_empty_reductions
from dycl.backends.onnx_float64_kernels import refuse_float64_gaps
from dycl.backends.onnx_squeeze import pin_squeezes
from dycl.backends.onnx_symbolics import local_symbolics
from dycl.backends.sampling import refuse_sampling
from dycl.backends.size_pins import pin_guards, warn_specialised
from dycl.export.determinism import refuse_nondeterminism
from dycl.export.shape_guards import guards_of
from dycl.export.subdnn import SubDNNModule
from dycl.export.tracer_state import TracerQuestions
from dycl.hcfg.decisions import Decision, DecisionRecorder
from dycl.hcfg.ports import Variant
from dycl.hostgen.manifest import ShapeGuard
from dycl.log import get_logger
from dycl.rewriter.errors import SourceLocation, UnsupportedError
from dycl.rewriter.vocabulary import TENSOR_METADATA_ATTRIBUTES, TENSOR_METADATA_METHODS

EXPORTER_NOTE = (
    "dycl exports sub-DNNs with the TorchScript-based torch.onnx exporter (dynamo=False), which PyTorch "
    "deprecates; the torch.export-based exporter (dynamo=True) was measured about 100x slower per sub-DNN "
    "and crashed the process on some sub-DNNs (see the note in dycl/backends/onnx_export.py)")

_LOG = get_logger("export")
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_JIT_DIR = os.path.join(_TORCH_DIR, "jit") + os.sep
_ONNX_DIR = os.path.join(_TORCH_DIR, "onnx") + os.sep
_CONVERSION = "Converting a tensor to a Python"
_BOOLEAN_CONVERSION = "Converting a tensor to a Python boolean"
_SHAPE_READS = ("Iterating over a tensor", "Using len to get tensor shape")
#: functions of a tensor that read only its metadata, never its values
_METADATA = TENSOR_METADATA_ATTRIBUTES | TENSOR_METADATA_METHODS | frozenset({
    "nelement", "layout", "is_floating_point", "is_complex", "is_contiguous", "stride", "element_size", "__len__",
    "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "new_zeros", "new_ones",
    "new_empty", "new_full", "is_sparse", "is_quantized", "names", "storage_offset", "is_nested", "get_device",
    "new_tensor"})
#: ``a.view_as(b)``: the values of ``a``, only the shape or dtype of ``b``
_SHAPED_LIKE = frozenset({"expand_as", "view_as", "reshape_as", "type_as"})


def export_onnx(module: SubDNNModule, variant: Variant, dynamic_axes: dict[str, dict[int, str]] | None,
                shown: set[tuple[str, str, int]] | None = None, dynamo: bool = False,
                guards: list[ShapeGuard] | None = None) -> bytes:
    """The checked ONNX bytes of ``variant`` (see the module note). Warnings other
    than the tracer's are passed on once per compile: ``shown`` holds those already
    passed on (one set per compile). ``dynamo=True`` uses the torch.export-based
    exporter instead (for ``benchmarks/exporters.py``; see ``EXPORTER_NOTE``).
    ``guards``: where given, ``bool()`` decisions on symbolic sizes are accepted when
    ``dycl.export.shape_guards`` finds the conditions that keep them, which are appended
    here for the host to check; without it such a decision is refused."""
    shown = set() if shown is None else shown
    names = {"input_names": [p.name for p in variant.inputs], "output_names": [p.name for p in variant.outputs],
             "dynamic_axes": dynamic_axes}
    buffer = io.BytesIO()
    # the trace runs the statements: an in-place update of an input (``out.index_add_``) must not reach the
    # example, which other variants' examples may share or view
    example = tuple(value.clone() if isinstance(value, torch.Tensor) else value for value in variant.examples[0])
    # Note: catch_warnings swaps the module-global filter list for the duration of the export
    # and restores it on exit; "always" inside it only makes every warning reach the record.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if dynamo:
            # forward(*inputs): one spec per flat input, inside the spec of the varargs parameter
            dims = {name: torch.export.Dim.DYNAMIC for axes in (dynamic_axes or {}).values() for name in axes.values()}
            shapes = (tuple({axis: dims[name] for axis, name in (dynamic_axes or {}).get(p.name, {}).items()} or None
                            for p in variant.inputs),)
            program = torch.onnx.export(module, example, dynamo=True, verbose=False,
                                        input_names=names["input_names"], output_names=names["output_names"],
                                        dynamic_shapes=shapes if dynamic_axes else None)
            buffer.write(program.model_proto.SerializeToString())
        else:
            # a scalar input is a number the host computed from data: its reads are followed into torch
            scalars = [value for value, port in zip(example, variant.inputs) if port.kind != "tensor"]
            # the taint mode outermost: the recorder and .data see the user's frames and calls first
            with _TraceDependences(module, example) as taint, _DataAsDetach(), \
                    DecisionRecorder(inside_torch=False, sources=scalars) as recorder, local_symbolics(), \
                    TracerQuestions() as questions:
                try:
                    torch.onnx.export(module, example, buffer, dynamo=False, opset_version=17,
                                      do_constant_folding=True, **names)
                except torch.onnx.errors.OnnxExporterError as error:  # an operator or value it cannot translate
                    refuse_sampling(None, module, variant)  # an untranslatable sampler (x.uniform_()): say so
                    raise exporter_error(error, module, variant) from error
                except RuntimeError as error:  # the tracer's assert on an overload it lacks (tensor + True)
                    if not tracer_lacks_op(error):
                        raise
                    raise exporter_error(error, module, variant) from error
    if not dynamo and questions.asked:  # the graph holds the branch a traced run takes: dycl.export.tracer_state
        raise _tracer_question_error(*questions.asked[0], module)
    data = pad_empty_reductions(buffer.getvalue())  # x[:, :0].sum(-1): dycl.backends.onnx_empty_reductions
    if not dynamo and dynamic_axes and guards is not None:  # x.squeeze(): dycl.backends.onnx_squeeze
        data, squeezed = pin_squeezes(data, module, variant, dynamic_axes)
        guards.extend(squeezed)
    # a size computed from values (NonZero: boolean indexing, torch.where(mask)) is never static
    data_sizes = sizes_from_data(data)
    symbolic = bool(dynamic_axes) or data_sizes
    guarded = False
    read = next((d for d in recorder.decisions if d.from_data), None) if dynamo is False else None
    if read is not None:  # a value from data chose something in the graph (hcfg.decisions note): no guard keeps it
        raise _frozen_error(f"{read.what} of a number computed from the inputs' data", read.where, module)
    # A shape read into Python is frozen too, which matters where a dim is symbolic; a scalar
    # input is a 0-d tensor here, so any read of one freezes a value the host computes.
    pinned: set[tuple[str, int]] = set()
    if dynamo is False and (symbolic or any(p.kind != "tensor" for p in variant.inputs)) and recorder.decisions:
        found = _decision_guards(module, variant, dynamic_axes, recorder.decisions) if guards is not None else None
        # a size made a number is pinned to the example only where no size comes from data: pinning a count
        # that NonZero produces would keep the example's count for every call
        if (found is None and guards is not None and symbolic and not data_sizes
                and all(d.shape_only for d in recorder.decisions)):
            found = _pinned(module, variant, dynamic_axes, recorder.decisions, shown)
            pinned = {(d.where.path, d.where.line) for d in recorder.decisions if d.where is not None and found}
        if found is None:
            decision = recorder.decisions[0]
            raise _frozen_error(f"{decision.what} of a tensor (a shape or a scalar input)", decision.where, module)
        guards.extend(found)
        guarded = True
    for record in caught:
        if not (issubclass(record.category, torch.jit.TracerWarning) and (record.filename, record.lineno) in pinned):
            _check_warning(record, module, symbolic, shown, guarded)  # (a size made a number there: pinned)
    graph = onnx.load_from_string(data).graph  # parsed once for both checks
    refuse_sampling(graph, module, variant)
    refuse_nondeterminism(module, variant.examples[0])  # np.random, the clock: frozen by the trace
    if not dynamo:
        refuse_float64_gaps(data, module, variant)
    check_dataflow(data, module, variant, graph, None if dynamo else taint.found)
    return data


#: ONNX operators whose output shape follows their input's values
_DATA_SIZED = frozenset({"NonZero", "Compress", "Unique"})


def sizes_from_data(data: bytes) -> bool:
    """Whether the ONNX model ``data`` computes a size from tensor values (an operator of
    ``_DATA_SIZED``, also inside ``If``/``Loop`` bodies)."""
    def found(graph: onnx.GraphProto) -> bool:
        return any(node.op_type in _DATA_SIZED or any(
            found(inner) for attribute in node.attribute
            for inner in ((attribute.g,) if attribute.HasField("g") else ()) + tuple(attribute.graphs))
            for node in graph.node)

    return found(onnx.load_from_string(data).graph)


class _DataAsDetach(TorchFunctionMode):
    """``t.data`` → ``t`` itself: the same value and storage, and the tracer keeps both its
    dependence on the inputs (lost by ``.data``) and an in-place update through it
    (``x.data.clamp_(0)`` changes ``x``: the exporter drops one made through ``t.detach()``).
    The graph computes inference, where ``.data``'s only other effect, leaving autograd, is moot."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") == "__get__" and getattr(getattr(func, "__self__", None),
                                                                  "__name__", "") == "data":
            return args[0]
        return func(*args, **(kwargs or {}))


def _pinned(module: SubDNNModule, variant: Variant, dynamic_axes: dict[str, dict[int, str]],
            decisions: list[Decision], shown: set[tuple[str, str, int]]) -> tuple[ShapeGuard, ...] | None:
    """Guards that pin the graph to the example's sizes (``size_pins``), with the warning;
    None where the sub-DNN does not run on fake tensors with symbolic sizes (it takes a
    size or a number from data: ``dycl.export.shape_guards``)."""
    decision = decisions[0]
    if guards_of(module, variant.examples[0], [p.name for p in variant.inputs], dynamic_axes) is None:
        return None
    where = decision.where
    if where is not None and where.path == module.filename:
        where = module.location_of(module.statement_at(where.line))
    found = pin_guards(variant, dynamic_axes, str(where or "an unknown line"))
    warn_specialised(found, decision, where, shown)
    return found


def _decision_guards(module: SubDNNModule, variant: Variant, dynamic_axes: dict[str, dict[int, str]] | None,
                     decisions: list[Decision]) -> tuple[ShapeGuard, ...] | None:
    """The shape guards that keep every ``bool()`` the trace decided (``dycl.export.shape_guards``);
    None where a decision converts a size or value to a number (a frozen number has no
    guard that keeps it) or the guards cannot be found. Scalar inputs are values: any
    decision on one is data-dependent, and the fake run that finds guards fails on it."""
    if not dynamic_axes or any(decision.what != "bool()" for decision in decisions):
        return None
    where = next((str(decision.where) for decision in decisions if decision.where is not None), "an unknown line")
    return guards_of(module, variant.examples[0], [p.name for p in variant.inputs], dynamic_axes, where)


def _check_warning(record: warnings.WarningMessage, module: SubDNNModule, symbolic: bool,
                   shown: set[tuple[str, str, int]], guarded: bool = False) -> None:
    """Raise for a tracer warning that froze a value (see the module note); ``guarded``:
    the trace's ``bool()`` decisions are kept by shape guards, so their warnings are expected."""
    message = str(record.message)
    if issubclass(record.category, torch.jit.TracerWarning):
        if guarded and message.startswith(_BOOLEAN_CONVERSION):
            return
        if record.filename == __file__:
            # attributed to _DataAsDetach's frame, i.e. to some torch function called through it; a read by
            # user or library code is caught with its real line by the decision recorder (hcfg.decisions)
            # when the example is traced, and above for symbolic variants, so only torch's own reads land here
            return
        inside_torch = record.filename.startswith(_TORCH_DIR) and not record.filename.startswith(_JIT_DIR)
        frozen = message.startswith(_CONVERSION) or (symbolic and message.startswith(_SHAPE_READS))
        if frozen and not inside_torch:
            what = message.split(".")[0].removeprefix("Converting ")
            raise _frozen_error(what, SourceLocation(record.filename, record.lineno), module)
        if inside_torch:
            return  # torch's own shape checks; torch ignores these too (torch/jit/_trace.py)
    key = (message, record.filename, record.lineno)
    if key in shown:
        return
    shown.add(key)
    if record.category is DeprecationWarning and "legacy TorchScript-based ONNX export" in message:
        _LOG.info(EXPORTER_NOTE)  # dycl's own choice: nothing for the user to act on (module note)
        return
    if record.category is DeprecationWarning and record.filename.startswith(_ONNX_DIR):
        _LOG.debug("torch.onnx: %s", message)  # the TorchScript exporter's own deprecations: dycl's choice too
        return
    warnings.warn_explicit(record.message, record.category, record.filename, record.lineno)  # as the user's filters say


def _tracer_question_error(question: str, where: SourceLocation, module: SubDNNModule) -> UnsupportedError:
    if where.path == module.filename:
        where = module.location_of(module.statement_at(where.line))
    return UnsupportedError(
        f"a question whether the model is being traced ({question}) in code exported as one graph: it is "
        "true while dycl exports the graph and false when the model runs eagerly, so the graph would hold "
        "the branch eager does not take", where,
        "ask it in forward() itself, where dycl folds it to eager's answer, or remove the check")


def _frozen_error(what: str, where: SourceLocation | None, module: SubDNNModule) -> UnsupportedError:
    first = module.variant.sub.statements[0]
    if where is not None and where.path == module.filename:
        first = module.statement_at(where.line)
        where = module.location_of(first)
    # no jargon: the graph is named by the model statement it starts with
    return UnsupportedError(
        f"a data-dependent Python value in code exported as one graph ({what}, in the graph that computes "
        f"`{_code(first)[:80]}`): the exported graph would keep the example's value",
        where or module.location_of(first),
        "keep the computation in tensors (torch.where, tensor shapes instead of Python ints), or compute the "
        "Python value in forward() where dycl can keep it on the host")


def check_dataflow(data: bytes, module: SubDNNModule, variant: Variant, graph: onnx.GraphProto | None = None,
                   eager: list[frozenset[int]] | None = None) -> None:
    """Raise ``UnsupportedError`` where the exported graph lost a dependence the eager
    run has: an output computed from an input's values (``dependences``, unless ``eager``
    gives them: ``_TraceDependences``) that the graph computes without that input (a dropped
    input, or a constant in its place)."""
    graph = onnx.load_from_string(data).graph if graph is None else graph
    reached = _reached_inputs(graph)
    eager = dependences(module, variant.examples[0]) if eager is None else eager
    for position, (output, needs) in enumerate(zip(variant.outputs, eager)):
        lost = [variant.inputs[p].name for p in sorted(needs) if variant.inputs[p].name not in reached[output.name]]
        if lost:
            statement = module.writer_of(position)
            raise UnsupportedError(
                f"a value the exported graph computes without its input ({', '.join(lost)}; "
                f"`{_code(statement)}`): the graph would keep the example's value",
                module.location_of(statement),
                "the exporter did not record how this value is computed from its input (e.g. through .numpy(), "
                "a Python number or a custom C++ op); compute it with tensor operations")


def _code(statement: cst.SimpleStatementLine) -> str:
    return cst.Module([]).code_for_node(statement.body[0]).strip()


def _reached_inputs(graph: onnx.GraphProto) -> dict[str, set[str]]:
    """For every value of ``graph``, the graph inputs it is computed from."""
    inputs = {value.name for value in graph.input}
    reached: dict[str, set[str]] = {name: {name} for name in inputs}
    for node in graph.node:  # ONNX nodes are topologically sorted
        sources = set(node.input) | _outer_names(node)
        found = set().union(*(reached.get(name, set()) for name in sources))
        for name in node.output:
            reached[name] = found
    return {value.name: reached.get(value.name, set()) for value in graph.output}


def _outer_names(node: onnx.NodeProto) -> set[str]:
    """Names a node's subgraphs (``If``/``Loop`` bodies) read from the enclosing scope."""
    names: set[str] = set()
    for attribute in node.attribute:
        for subgraph in (*([attribute.g] if attribute.HasField("g") else []), *attribute.graphs):
            for inner in subgraph.node:
                names |= set(inner.input) | _outer_names(inner)
    return names


def dependences(module: SubDNNModule, example: tuple[torch.Tensor, ...]) -> list[frozenset[int]]:
    """For each flat output of ``module`` on ``example``, the inputs whose values it is computed from."""
    inputs = [t.clone() for t in example]  # one tensor may be the example of several inputs
    with torch.no_grad(), _Dependences(inputs) as taint:
        outputs = module(*inputs)
    return [taint.of(output) for output in outputs]


class _TraceDependences:
    """``dependences`` read off the exporter's own run of ``module`` (the trace runs the same
    Python code on the same values, so the taint it carries is the eager run's): ``found``,
    or None where that run was not one call of ``module`` on ``example``'s tensors themselves
    (``check_dataflow`` then runs the module once more)."""

    def __init__(self, module: SubDNNModule, example: tuple[torch.Tensor, ...]) -> None:
        self.module, self.example = module, example
        self.taint = _Dependences(list(example))
        self.calls: list[tuple[tuple, Any]] = []
        self.found: list[frozenset[int]] | None = None

    def __enter__(self) -> _TraceDependences:
        self.hook = self.module.register_forward_hook(lambda _, args, out: self.calls.append((args, out)))
        self.taint.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.taint.__exit__(*exc)
        self.hook.remove()
        if len(self.calls) == 1 and len(self.calls[0][0]) == len(self.example) and all(
                given is mine for given, mine in zip(self.calls[0][0], self.example)):
            self.found = [self.taint.of(output) for output in self.calls[0][1]]


class _Dependences(TorchFunctionMode):
    """Taint tracking: each tensor computed by a torch function carries the inputs
    its arguments carry; metadata reads (shape, dtype, ``zeros_like``) carry none."""

    def __init__(self, inputs: list[torch.Tensor]) -> None:
        super().__init__()
        # tensor id -> (the tensor, kept alive so the id stays its own; the inputs it depends on)
        self.taint: dict[int, tuple[torch.Tensor, frozenset[int]]] = {
            id(t): (t, frozenset({i})) for i, t in enumerate(inputs)}

    def of(self, value: object) -> frozenset[int]:
        entry = self.taint.get(id(value))
        return entry[1] if entry is not None and entry[0] is value else frozenset()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        name = getattr(func, "__name__", "")
        if name == "__get__":  # a property: .data, .shape, .T
            name = getattr(getattr(func, "__self__", None), "__name__", "")
        if name in _METADATA:
            return result
        sources = args[:1] if name in _SHAPED_LIKE else (args, kwargs)
        carried = frozenset().union(*(self.of(leaf) for leaf in tree_flatten(sources)[0]))
        if carried:
            for leaf in tree_flatten(result)[0]:
                if isinstance(leaf, torch.Tensor):
                    self.taint[id(leaf)] = (leaf, self.of(leaf) | carried)
        return result
