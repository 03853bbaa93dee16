"""Which nodes of a single-sample ONNX graph keep samples apart when the graph
is run with its batch-of-one dim widened to a group of samples.

A sub-DNN is exported for one sample: its tensors have a leading dim of 1.
Widening that dim to ``G`` (one row per sample) computes every sample at once,
but only where each node keeps rows apart. This module proves it node by node,
in graph order, with a whitelist of per-op axis rules; a node it cannot prove
goes to the *tail* (``RowPlan.tail``), and so does every node that reads a
tail value. The caller runs the proven nodes batched and the tail per sample
(``dycl.per_sample.group_onnx``).

Value classes, for the values the proven nodes read and write:

- *rowed*: static rank >= 1 and dim 0 of 1 in the single-sample graph; in the
  widened graph dim 0 is ``G`` and row ``g`` is exactly sample ``g``'s value.
- *shared*: initializers, ``Constant`` outputs and the outputs of
  deterministic nodes that read only shared values: the same in every sample.
- *sample*: a value of one sample that has no row dim (a whole-tensor
  reduction ``conf.max()``, ``x[0]``, ``x.view(-1)``, an input whose dim 0 is
  not 1: the host passes every input with the group dim in front); in the widened graph
  it has the group dim in front of its single-sample shape (``()`` -> ``(G,)``),
  and element ``g`` is sample ``g``'s value. A node that combines it with rowed
  values first gets it unit dims after the group dim so that it broadcasts
  against its own row only (``RowPlan.edits``).

Assumes: the graph is the ONNX export of one sample with static shapes
(``onnx.shape_inference`` infers every rowed value's shape), default-domain
opset >= 13 (the axis semantics of Softmax, Reduce*, Squeeze below); graph
input names are unique SSA names (the exporter's).
Guarantees: for every node in ``RowPlan.batched``, if each rowed input has
``G`` rows with row ``g`` sample ``g``'s value and each sample input ``G``
entries with entry ``g`` sample ``g``'s, then each rowed or sample output holds,
at row or entry ``g``, what the single-sample graph computes for sample ``g`` (in exact
arithmetic: kernels may round differently at another batch size), once
``RowPlan.reshapes`` replaces the listed ``Reshape`` targets and ``RowPlan.edits``
the listed axes, targets and inputs. Any op not in the rules, any node with a
subgraph, any read of the group size into a value (a ``Shape`` or ``Size`` of a
rowed value: fold static ones first, ``dycl.export.static_fold``, as ``per_sample_onnx``
does), any concatenation, slicing or softmax along dim 0, any broadcast that
would move or widen dim 0 or meet a sample value with another sample's, and any
op without a rule for sample values that reads one sends the node to the tail.
A reduction over dim 0 is proven: it has one element per sample.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import numpy_helper

ROWED, SHARED, SAMPLE = "rowed", "shared", "sample"

_UNARY = frozenset([
    "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Cast", "Ceil", "Celu", "Cos", "Cosh", "Elu", "Erf",
    "Exp", "Floor", "Gelu", "HardSigmoid", "HardSwish", "Identity", "IsInf", "IsNaN", "LeakyRelu", "Log", "Mish",
    "Neg", "Not", "Reciprocal", "Relu", "Round", "Selu", "Shrink", "Sigmoid", "Sign", "Sin", "Sinh", "Softplus",
    "Softsign", "Sqrt", "Tan", "Tanh", "ThresholdedRelu",
])
_BROADCAST = frozenset([
    "Add", "And", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Clip", "Div", "Equal",
    "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "Max", "Mean", "Min", "Mod", "Mul", "Or", "Pow", "PRelu",
    "Sub", "Sum", "Where", "Xor",
])
#: one rowed data input (the first); the other inputs shared; the op works per leading index
_PER_ROW = frozenset([
    "AveragePool", "Conv", "ConvTranspose", "DepthToSpace", "GlobalAveragePool", "GlobalLpPool", "GlobalMaxPool",
    "InstanceNormalization", "LpNormalization", "LpPool", "LRN", "SpaceToDepth",
])
_REDUCE = frozenset([
    "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd",
    "ReduceSum", "ReduceSumSquare",
])
#: reductions whose axes are an input (not an attribute) from opset 13 (ReduceSum) or 18 (the rest)
_AXES_INPUT_SINCE = {"ReduceSum": 13}
#: reductions that give back their one element unchanged
_ONE_ELEMENT_IDENTITY = frozenset(["ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum"])
_RANDOM = frozenset([
    "Bernoulli", "Dropout", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
])


@dataclass
class Edit:
    """How a proven node changes in the widened graph (besides its names)."""

    #: replaced by an ``Identity`` of its first input (the row dim it drops is the group dim)
    identity: bool = False
    #: its ``axes`` (attribute or input, as the op's opset has them) in the widened graph
    axes: list[int] | None = None
    #: its ``axis`` attribute in the widened graph
    axis: int | None = None
    #: a ``Reshape``'s target shape in the widened graph (a leading 0 copies the group dim)
    target: tuple[int, ...] | None = None
    #: the op takes its axes as an input (opset 13 for Squeeze, Unsqueeze, ReduceSum; 18 for the others)
    axes_as_input: bool = False
    #: input position -> how many unit dims to insert after the group dim of that sample input
    lifts: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    """A rule's proof for a node whose outputs are not simply rowed, or that changes when widened."""

    kind: str
    edit: Edit = field(default_factory=Edit)


@dataclass
class RowPlan:
    """The result of ``analyse`` (module docstring)."""

    classes: dict[str, str] = field(default_factory=dict)
    batched: list[int] = field(default_factory=list)
    tail: list[int] = field(default_factory=list)
    #: node index -> the int64 target shape to use in the widened graph
    reshapes: dict[int, np.ndarray] = field(default_factory=dict)
    #: node index -> positions of shared inputs (dim 0 of 1) to repeat over the group: a ``Concat``
    #: joins them to rowed inputs, and unlike arithmetic it does not broadcast
    expands: dict[int, list[int]] = field(default_factory=dict)
    #: node index -> its changes in the widened graph (sample values, reductions over dim 0)
    edits: dict[int, Edit] = field(default_factory=dict)
    #: the first tail node and why it is there (for DYCL_DUMP and tests)
    first_refusal: str | None = None
    #: value name -> its type in the single-sample graph, where shape inference knows it
    types: dict[str, onnx.TypeProto] = field(default_factory=dict)

    @property
    def rowed(self) -> set[str]:
        return {name for name, kind in self.classes.items() if kind == ROWED}

    @property
    def per_sample(self) -> set[str]:
        """The values that differ per sample: rowed and sample values."""
        return {name for name, kind in self.classes.items() if kind in (ROWED, SAMPLE)}


@dataclass
class _Graph:
    """What the rules read: shapes, constants, attributes, opset."""

    model: onnx.ModelProto
    shapes: dict[str, tuple | None]
    constants: dict[str, np.ndarray]
    opset: int

    def shape(self, name: str) -> tuple | None:
        return self.shapes.get(name)

    def rank(self, name: str) -> int | None:
        shape = self.shape(name)
        return None if shape is None else len(shape)

    def constant(self, name: str) -> np.ndarray | None:
        return self.constants.get(name)


def _shapes(model: onnx.ModelProto, types: dict[str, onnx.TypeProto]) -> dict[str, tuple | None]:
    """Value name -> its static shape (ints, or None per unknown dim); None if the rank is
    unknown. Fills ``types`` with every value's inferred type."""
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    shapes: dict[str, tuple | None] = {}
    graph = inferred.graph
    for value in [*graph.input, *graph.value_info, *graph.output]:
        types[value.name] = value.type
        tensor = value.type.tensor_type
        if not value.type.HasField("tensor_type") or not tensor.HasField("shape"):
            shapes[value.name] = None
            continue
        shapes[value.name] = tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)
    for tensor in graph.initializer:
        shapes[tensor.name] = tuple(tensor.dims)
    return shapes


def _constants(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    values = {tensor.name: numpy_helper.to_array(tensor) for tensor in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant" and len(node.attribute) == 1 and node.attribute[0].name == "value":
            values[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    return values


def _attribute(node: onnx.NodeProto, name: str, default=None):
    for attribute in node.attribute:
        if attribute.name == name:
            return onnx.helper.get_attribute_value(attribute)
    return default


def _axis(value: int, rank: int) -> int:
    return value + rank if value < 0 else value


def _inputs(node: onnx.NodeProto) -> list[str]:
    return [name for name in node.input if name]


# -- the rules: each returns None when the node keeps rows apart and its outputs are rowed (as
#    the module docstring says), an ``Outcome`` when its outputs are of another class or it
#    changes when widened, else the reason; ``kinds`` gives each input's class ('' if absent)

Rule = Callable[[onnx.NodeProto, list[str], _Graph], "str | np.ndarray | Outcome | None"]


def _broadcast(node, kinds, graph):
    out_rank = graph.rank(node.output[0])
    rowed = ROWED in kinds
    lifts = {}
    for position, (name, kind) in enumerate(zip(node.input, kinds)):
        if not name:
            continue
        shape = graph.shape(name)
        if shape is None or out_rank is None:
            return "unknown rank"
        if kind == ROWED and len(shape) != out_rank:
            return "a rowed input broadcast to a higher rank (its dim 0 would move)"
        if kind == SHARED and rowed and len(shape) == out_rank and shape[0] != 1:
            return "a shared input whose dim 0 is not 1 (it would widen dim 0)"
        if kind == SAMPLE:
            room = out_rank - 1 if rowed else out_rank  # a sample value's dims align right of the row dim
            if len(shape) > room:
                return "a sample value broadcast over the row dim"
            if len(shape) < room:  # in the widened graph its group dim must meet the rows' (G, 1, ..., 1, dims)
                lifts[position] = room - len(shape)
    if SAMPLE not in kinds:
        return None
    return Outcome(ROWED if rowed else SAMPLE, Edit(lifts=lifts))


def _only_first_rowed(kinds: list[str]) -> bool:
    return kinds[0] == ROWED and all(kind != ROWED for kind in kinds[1:])


def _per_row(node, kinds, graph):
    if not _only_first_rowed(kinds):
        return "a weight that differs per sample"
    if node.op_type == "LpNormalization" and _axis(_attribute(node, "axis", -1), graph.rank(node.input[0]) or 0) == 0:
        return "normalises along dim 0"
    return None


def _unary(node, kinds, graph):
    if kinds[0] == SAMPLE and all(kind in (SHARED, "") for kind in kinds[1:]):
        return Outcome(SAMPLE)
    return None if _only_first_rowed(kinds) or kinds == [ROWED] else "more than one rowed input"


def _cast_like(node, kinds, graph):
    # the output is the first input's values (only the dtype comes from the second): it has their class
    if kinds[0] == SHARED:
        return "a shared value cast like a per-sample one"
    return Outcome(kinds[0])


def _pool(node, kinds, graph):
    if len([o for o in node.output if o]) != 1:
        return "MaxPool's indices count over the whole batch"
    return _per_row(node, kinds, graph)


def _batch_norm(node, kinds, graph):
    if _attribute(node, "training_mode", 0) or len([o for o in node.output if o]) != 1:
        return "BatchNormalization in training mode (statistics over the batch)"
    return _per_row(node, kinds, graph)


def _layer_norm(node, kinds, graph):
    rank = graph.rank(node.input[0])
    if rank is None or _axis(_attribute(node, "axis", -1), rank) == 0:
        return "normalises over dim 0"
    return None if _only_first_rowed(kinds) else "a weight that differs per sample"


def _gemm(node, kinds, graph):
    if kinds[0] != ROWED or _attribute(node, "transA", 0) or any(kind == ROWED for kind in kinds[1:]):
        return "Gemm that contracts over the rows"
    if len(kinds) > 2:
        shape = graph.shape(node.input[2])
        if shape is None or (len(shape) == 2 and shape[0] != 1):
            return "a bias whose dim 0 is not 1"
    return None


def _matmul(node, kinds, graph):
    a, b = graph.rank(node.input[0]), graph.rank(node.input[1])
    if a is None or b is None:
        return "unknown rank"
    if SAMPLE in kinds:  # ``fc(x.view(-1))``: (G, ..., k) @ (k, n) multiplies each sample's own rows
        if kinds == [SAMPLE, SHARED] and a >= 1 and b <= 2:
            return Outcome(SAMPLE)
        return "a product whose sample operand would meet other samples"
    if kinds == [ROWED, ROWED]:
        return None if a == b >= 3 else "a product of two rowed matrices contracts over the rows"
    rowed, shared = (a, b) if kinds[0] == ROWED else (b, a)
    if kinds[1] == ROWED and rowed < 3:
        return "a rowed right-hand matrix contracts over the rows"
    if rowed < 2 or shared > rowed:
        return "the product would move dim 0"
    other = node.input[1] if kinds[0] == ROWED else node.input[0]
    if shared >= 3 and shared == rowed and graph.shape(other)[0] != 1:  # rank 2: a matrix, not stacked ones
        return "a shared factor whose dim 0 is not 1"
    return None


def _axis_not_zero(default: int) -> Rule:
    """An op along one ``axis`` of its first input: not the row dim of a rowed value; any
    axis of a sample value (``logits.view(-1).argmax()``), one further out when widened."""
    def rule(node, kinds, graph):
        rank = graph.rank(node.input[0])
        if rank is None:
            return "unknown rank"
        axis = _axis(_attribute(node, "axis", default), rank)
        if kinds[0] == SAMPLE and all(kind in (SHARED, "") for kind in kinds[1:]):
            return Outcome(SAMPLE, Edit(axis=axis + 1))
        if axis == 0:
            return f"{node.op_type} along dim 0"
        return None if _only_first_rowed(kinds) else "more than one rowed input"
    return rule


def _reduced_axes(node, graph, rank: int) -> list[int] | str | None:
    """The axes ``node`` reduces, normalised and sorted (every axis where none are given);
    None for a no-op (``noop_with_empty_axes``); a reason where they are not known."""
    if graph.opset >= _AXES_INPUT_SINCE.get(node.op_type, 18):
        given = len(node.input) > 1 and node.input[1]
        value = graph.constant(node.input[1]) if given else None
        if given and value is None:
            return "axes computed at run time"
        axes = [] if value is None else [int(a) for a in np.ravel(value)]
    else:
        axes = list(_attribute(node, "axes", None) or [])
    if not axes:
        if _attribute(node, "noop_with_empty_axes", 0):
            return None
        axes = list(range(rank))
    return sorted({_axis(a, rank) for a in axes})


def _reduce(node, kinds, graph):
    if any(kind != SHARED for kind in kinds[1:] if kind):
        return "axes that differ per sample"
    rank = graph.rank(node.input[0])
    if rank is None:
        return "unknown rank"
    axes = _reduced_axes(node, graph, rank)
    if isinstance(axes, str):
        return axes
    as_input = graph.opset >= _AXES_INPUT_SINCE.get(node.op_type, 18)
    if kinds[0] == SAMPLE:
        if axes is None:
            return Outcome(SAMPLE)
        if not axes:
            return "reduces a sample's scalar"
        return Outcome(SAMPLE, Edit(axes=[a + 1 for a in axes], axes_as_input=as_input))
    if axes is None or 0 not in axes:
        return None
    # dim 0 is one sample's row: reducing over it leaves each element as it is, so in the widened graph
    # the node reduces over the other axes only (and drops the row dim where it did: a sample value)
    rest = [a for a in axes if a != 0]
    if rest:
        edit = Edit(axes=rest, axes_as_input=as_input)
    elif node.op_type in _ONE_ELEMENT_IDENTITY:
        edit = Edit(identity=True)
    else:
        return f"{node.op_type} over dim 0 alone (not the identity on one element)"
    return Outcome(ROWED if _attribute(node, "keepdims", 1) else SAMPLE, edit)


def _concat(node, kinds, graph):
    rank = graph.rank(node.output[0])
    if rank is None or _axis(_attribute(node, "axis"), rank) == 0:
        return "concatenates along dim 0"
    for name, kind in zip(node.input, kinds):
        shape = graph.shape(name)
        if kind == SHARED and (shape is None or len(shape) != rank or shape[0] != 1):
            return "concatenates a shared tensor whose dim 0 is not 1"
    # a shared input is repeated over the group first (RowPlan.expands): each row gets it, as each sample does
    return None


def _split(node, kinds, graph):
    rank = graph.rank(node.input[0])
    if rank is None or _axis(_attribute(node, "axis", 0), rank) == 0:
        return "splits along dim 0"
    return None if _only_first_rowed(kinds) else "split sizes that differ per sample"


def _constant_axes(node, graph, position: int) -> list[int] | None:
    """An op's axes, from its attribute (older opsets) or its ``position``-th input when constant."""
    if len(node.input) > position and node.input[position]:
        value = graph.constant(node.input[position])
        return None if value is None else [int(v) for v in np.ravel(value)]
    axes = _attribute(node, "axes")
    return None if axes is None else list(axes)


def _slice(node, kinds, graph):
    if not _only_first_rowed(kinds):
        return "slice bounds that differ per sample"
    rank = graph.rank(node.input[0])
    axes = _constant_axes(node, graph, 3)
    if rank is None or axes is None or any(_axis(a, rank) == 0 for a in axes):
        return "slices dim 0 (or axes not known)"
    return None


def _gather(node, kinds, graph):
    rank = graph.rank(node.input[0])
    axis = None if rank is None else _axis(_attribute(node, "axis", 0), rank)
    if axis is None:
        return "unknown rank"
    if kinds == [ROWED, SHARED] and axis != 0:
        return None
    if kinds == [SHARED, ROWED] and axis == 0:  # an embedding lookup: the indices' rows are the output's
        return None
    if kinds == [ROWED, SHARED]:  # ``x[0]``: the sample's one row, without the row dim
        index = graph.constant(node.input[1])
        if index is not None and index.ndim == 0 and int(index) in (0, -1):
            return Outcome(SAMPLE, Edit(identity=True))
    if kinds == [SAMPLE, SHARED]:
        return Outcome(SAMPLE, Edit(axis=axis + 1))
    if kinds == [SHARED, SAMPLE] and axis == 0:
        return Outcome(SAMPLE)
    return "gathers along dim 0"


def _gather_elements(node, kinds, graph):
    rank = graph.rank(node.input[0])
    if kinds != [ROWED, ROWED] or rank is None or _axis(_attribute(node, "axis", 0), rank) == 0:
        return "gathers along dim 0 (or indices without rows)"
    return None


def _transpose(node, kinds, graph):
    rank = graph.rank(node.input[0])
    perm = _attribute(node, "perm")
    perm = list(range(rank))[::-1] if perm is None and rank is not None else perm
    return None if perm is not None and perm[0] == 0 else "moves dim 0"


def _flatten(node, kinds, graph):
    rank = graph.rank(node.input[0])
    return None if rank is not None and _axis(_attribute(node, "axis", 1), rank) >= 1 else "flattens dim 0 away"


def _squeeze(node, kinds, graph):
    shape = graph.shape(node.input[0])
    if any(kind != SHARED for kind in kinds[1:] if kind) or shape is None:
        return "axes that differ per sample (or an unknown rank)"
    if len(node.input) > 1 and node.input[1] and graph.constant(node.input[1]) is None:
        return "axes computed at run time"
    axes = _constant_axes(node, graph, 1)
    if not axes:  # every size-1 dim: known only where the shape is
        if None in shape:
            return "squeezes every size-1 dim of a shape not known"
        axes = [axis for axis, size in enumerate(shape) if size == 1]
    axes = sorted({_axis(a, len(shape)) for a in axes})
    as_input = graph.opset >= 13
    if kinds[0] == SAMPLE:
        return Outcome(SAMPLE, Edit(axes=[a + 1 for a in axes], axes_as_input=as_input) if axes else Edit(
            identity=True))
    if 0 not in axes:
        return None
    rest = [a for a in axes if a != 0]
    return Outcome(SAMPLE, Edit(axes=rest, axes_as_input=as_input) if rest else Edit(identity=True))


def _unsqueeze(node, kinds, graph):
    rank = graph.rank(node.output[0])
    axes = _constant_axes(node, graph, 1)
    if kinds[0] == SAMPLE and rank is not None and axes is not None and all(k in (SHARED, "") for k in kinds[1:]):
        return Outcome(SAMPLE, Edit(axes=sorted(_axis(a, rank) + 1 for a in axes), axes_as_input=graph.opset >= 13))
    if kinds[0] != ROWED or rank is None or axes is None or any(_axis(a, rank) == 0 for a in axes):
        return "inserts a dim before dim 0"
    return None


def _reshape_target(node, kinds, graph) -> np.ndarray | Outcome | str:
    """The widened graph's target shape (dim 0 copied from the input), or why there is none.
    A rowed value reshaped without its row dim (``x.view(-1)``) and a sample value
    reshaped are sample values: the target gets the group dim in front."""
    shape = graph.constant(node.input[1]) if len(node.input) > 1 else None
    out = graph.shape(node.output[0])
    if kinds[0] not in (ROWED, SAMPLE) or shape is None or _attribute(node, "allowzero", 0) or any(
            kind != SHARED for kind in kinds[1:]):
        return "a target shape computed at run time"
    if out is None or not out or shape.ndim != 1 or len(shape) == 0:
        return "a reshape of an unknown shape"
    if kinds[0] == ROWED and out[0] == 1:
        target = np.array(shape, dtype=np.int64)
        target[0] = 0  # 0: copy the input's dim 0, the group
        return target
    if 0 in shape:  # a 0 copies the input's dim at its position, which the group dim shifts
        return "a reshape that copies input dims (0 in its target)"
    return Outcome(SAMPLE, Edit(target=(0, *(int(size) for size in shape))))


def _expand(node, kinds, graph):
    shape = graph.constant(node.input[1])
    rank = graph.rank(node.input[0])
    if kinds != [ROWED, SHARED] or shape is None or rank is None or len(shape) > rank:
        return "an expand that moves or widens dim 0"
    return None if len(shape) < rank or shape[0] == 1 else "an expand that widens dim 0"


def _tile(node, kinds, graph):
    repeats = graph.constant(node.input[1])
    return None if kinds == [ROWED, SHARED] and repeats is not None and repeats[0] == 1 else "tiles dim 0"


def _pad(node, kinds, graph):
    pads = graph.constant(node.input[1]) if len(node.input) > 1 else None
    rank = graph.rank(node.input[0])
    if not _only_first_rowed(kinds) or pads is None or rank is None or (len(node.input) > 3 and node.input[3]):
        return "pads not known"
    return None if pads[0] == 0 and pads[rank] == 0 else "pads dim 0"


def _resize(node, kinds, graph):
    scales = graph.constant(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    sizes = len(node.input) > 3 and node.input[3]
    if not _only_first_rowed(kinds) or sizes or scales is None or scales[0] != 1 or _attribute(node, "axes"):
        return "a resize given by sizes (dim 0 fixed to 1) or that scales dim 0"
    return None


def _trilu(node, kinds, graph):
    rank = graph.rank(node.input[0])
    return None if _only_first_rowed(kinds) and rank is not None and rank >= 3 else "a triangle across the rows"


def _topk(node, kinds, graph):
    return _axis_not_zero(-1)(node, kinds, graph)


RULES: dict[str, Rule] = {
    **{op: _unary for op in _UNARY},
    **{op: _broadcast for op in _BROADCAST},
    **{op: _per_row for op in _PER_ROW},
    **{op: _reduce for op in _REDUCE},
    "CastLike": _cast_like, "MaxPool": _pool, "BatchNormalization": _batch_norm,
    "LayerNormalization": _layer_norm, "Gemm": _gemm,
    "MatMul": _matmul, "Softmax": _axis_not_zero(-1), "LogSoftmax": _axis_not_zero(-1),
    "Hardmax": _axis_not_zero(-1), "ArgMax": _axis_not_zero(0), "ArgMin": _axis_not_zero(0), "TopK": _topk,
    "Concat": _concat, "Split": _split, "Slice": _slice, "Gather": _gather, "GatherElements": _gather_elements,
    "Transpose": _transpose, "Flatten": _flatten, "Squeeze": _squeeze, "Unsqueeze": _unsqueeze,
    "Expand": _expand, "Tile": _tile, "Pad": _pad, "Resize": _resize, "Trilu": _trilu,
    "Reshape": _reshape_target,  # proven: it gives the widened graph's target shape instead of None
}


#: the ops whose rules handle sample values; any other op reading one goes to the tail
_SAMPLE_AWARE = _UNARY | _BROADCAST | _REDUCE | {
    "ArgMax", "ArgMin", "CastLike", "Gather", "Hardmax", "LogSoftmax", "MatMul", "Reshape", "Softmax", "Squeeze",
    "TopK", "Unsqueeze"}


def _has_subgraph(node: onnx.NodeProto) -> bool:
    return any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute)


def _rowed_shape(shape: tuple | None) -> bool:
    return shape is not None and len(shape) >= 1 and shape[0] == 1


def analyse(model: onnx.ModelProto) -> RowPlan:
    """Split ``model``'s nodes into those proven to keep rows apart and the tail (module docstring)."""
    plan = RowPlan()
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    graph = _Graph(model, _shapes(model, plan.types), _constants(model), opset)
    for tensor in model.graph.initializer:
        plan.classes[tensor.name] = SHARED
    for value in model.graph.input:  # each comes with the group dim in front
        if value.name not in plan.classes and graph.shape(value.name) is not None:
            plan.classes[value.name] = ROWED if _rowed_shape(graph.shape(value.name)) else SAMPLE
    for index, node in enumerate(model.graph.node):
        reason = _classify(node, graph, plan) if opset >= 13 else "opset below 13"
        if reason is None:
            plan.batched.append(index)
            continue
        plan.tail.append(index)
        if plan.first_refusal is None:
            plan.first_refusal = f"{node.op_type} {node.name or index}: {reason}"
    return plan


def _classify(node: onnx.NodeProto, graph: _Graph, plan: RowPlan) -> str | None:
    """None (and the outputs' classes recorded) when ``node`` is proven; else why not."""
    kinds = [plan.classes.get(name, "?") if name else "" for name in node.input]
    if "?" in kinds:
        return "reads a value of the tail"
    if node.domain not in ("", "ai.onnx") or _has_subgraph(node) or node.op_type in _RANDOM:
        return "not a deterministic default-domain op without subgraphs"
    outputs = [name for name in node.output if name]
    if ROWED not in kinds and SAMPLE not in kinds:
        for name in outputs:
            plan.classes[name] = SHARED
        return None
    if node.op_type in ("Shape", "Size"):  # static ones are constants already (dycl.export.static_fold)
        return "reads the group size into a value"
    rule = RULES.get(node.op_type)
    if rule is None:
        return "no row rule for this op"
    if SAMPLE in kinds and node.op_type not in _SAMPLE_AWARE:
        return "reads a sample value (no rule for it)"
    reason = rule(node, kinds, graph)
    if isinstance(reason, str):
        return reason
    outcome = reason if isinstance(reason, Outcome) else Outcome(ROWED)
    if outcome.kind == ROWED and not all(_rowed_shape(graph.shape(name)) for name in outputs):
        return "an output without a static dim 0 of 1"
    if outcome.kind == SAMPLE and any(graph.shape(name) is None for name in outputs):
        return "an output of unknown rank"
    index = len(plan.batched) + len(plan.tail)
    if isinstance(reason, np.ndarray):  # a Reshape's widened target
        plan.reshapes[index] = reason
    if node.op_type == "Concat" and SHARED in kinds:
        plan.expands[index] = [position for position, kind in enumerate(kinds) if kind == SHARED]
    if outcome.edit != Edit():
        plan.edits[index] = outcome.edit
    for name in outputs:
        plan.classes[name] = outcome.kind
    return None


__all__ = ["ROWED", "RULES", "SAMPLE", "SHARED", "Edit", "Outcome", "RowPlan", "analyse"]
