"""The compilable forms (variants) of a sub-DNN, from the examples tracing recorded.

Every variable a sub-DNN reads or writes gets a ``Layout`` (``hcfg.ports``).
Lists of tensors of different lengths reach the same sub-DNN on different paths
(``torch.stack(tokens)`` after a decoding loop), so a sub-DNN has one variant
per tuple of the lengths of its top-level tensor-list inputs and of the ranks
of its tensor inputs whose rank differs between paths (``squeeze(0)`` on the
path of a batch of 1: ``hcfg.size_tests``); the host picks the variant from
``len()`` of those lists and ``.ndim`` of those tensors. Any other structure — nested
containers, dict keys, dataclass fields, statics such as a device — must be
the same on every path that reaches the sub-DNN: where two paths disagree (a
list of two on one branch and of three on the other, read as ``h, *rest``),
``variants_of`` raises ``UnsupportedError`` at the user's line.

Within a variant a dimension is symbolic when the symbolic shape propagation
(``hcfg.symbolic``) says so — named by its expression over the user's dynamic
dims, so equal dims share a name across sub-DNNs — or when it differs between
examples (the predecessors of a join disagree): then it gets a fresh name.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import libcst as cst
import torch
from dycl.hcfg.graph import SubDNN
from dycl.hcfg.list_indices import as_index_tensors, index_lists, refuse_int_list_indices
from dycl.hcfg.ports import Layout, Port, Record, Static, Variant
from dycl.hcfg.pytree_ports import NotAPortValue, layout_of, leaf_values, port_values
from dycl.hcfg.trace import Examples
from dycl.rewriter.errors import SourceLocation, UnsupportedError
from dycl.rewriter.locations import LocationTable
from dycl.rewriter.vocabulary import dtype_name
from dycl.rewriter.walk import bound_names, read_names

if TYPE_CHECKING:
    from dycl.hcfg.symbolic import SymbolicShapes

_HINT = ("values that cross between compiled parts of forward() are tensors, Python numbers, devices, dtypes, "
         "None, strings, and lists, tuples, dicts, namedtuples and dataclasses of them, with one structure on "
         "every path")


def variants_of(sub: SubDNN, examples: Examples, shapes: SymbolicShapes | None = None,
                locations: LocationTable | None = None) -> list[Variant]:
    """The variants of ``sub`` (see the module note)."""
    where = _Where(sub, locations or LocationTable())
    indexes = index_lists(sub, examples.inputs)
    if indexes:  # lists of ints read only as an index: 1-d int64 tensors (hcfg.list_indices)
        examples = replace(examples, inputs=[as_index_tensors(sub, values, indexes) for values in examples.inputs],
                           symbolic_inputs=[as_index_tensors(sub, values, indexes, mirror=True)
                                            for values in examples.symbolic_inputs])
    in_layouts = [_layouts(sub.inputs, values, where, "read") for values in examples.inputs]
    refuse_int_list_indices(sub, examples.inputs, in_layouts, where.locations)
    out_layouts = [_layouts(sub.outputs, values, where, "written") for values in examples.outputs]
    ranks = [_ranks(sub.inputs, values, layouts) for values, layouts in zip(examples.inputs, in_layouts)]
    ranked = tuple(name for name in sub.inputs if len({rank.get(name) for rank in ranks}) > 1)
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, layouts in enumerate(in_layouts):
        key = tuple(len(layout.leaves) for layout in layouts if layout.is_tensor_list)
        groups.setdefault(key + tuple(ranks[i].get(name, NUMBER_RANKS[float]) for name in ranked), []).append(i)
    variants = []
    for key, members in sorted(groups.items()):
        inputs_layout = _agreed(sub.inputs, [in_layouts[i] for i in members], where, "read")
        _same_dtypes(sub.inputs, [examples.inputs[i] for i in members], where)
        outputs_layout = _agreed(sub.outputs, [out_layouts[i] for i in members], where, "written")
        flat_inputs = [_flat(examples.inputs[i], inputs_layout) for i in members]
        flat_outputs = [_flat(examples.outputs[i], outputs_layout) for i in members]
        named_inputs = named_outputs = None
        if shapes is not None and examples.symbolic_inputs:
            named_inputs = [_flat_shapes(examples.symbolic_inputs[i], inputs_layout, shapes) for i in members]
            named_outputs = [_flat_shapes(examples.symbolic_outputs[i], outputs_layout, shapes) for i in members]
        prefix = sub.name + ("_" + "_".join(map(str, key)) if key else "")
        in_names = _port_names(sub.inputs, inputs_layout)
        out_names = _port_names(sub.outputs, outputs_layout)
        inputs = _ports(in_names, flat_inputs, prefix, "in", named_inputs)
        # ONNX names every value once: an output may not share its input's name.
        outputs = tuple(replace(p, name=f"{p.name}:out")
                        for p in _ports(out_names, flat_outputs, prefix, "out", named_outputs))
        if indexes:
            inputs, outputs = _index_lengths(inputs, outputs, indexes, [examples.inputs[i] for i in members], sub)
        examples_flat = tuple(tuple(t for _, t in flat) for flat in flat_inputs)
        variants.append(Variant(sub, key, inputs, outputs, examples_flat, inputs_layout, outputs_layout, ranked))
    for variant in variants[1:]:
        if [layout.signature() for layout in variant.output_layouts] != [
                layout.signature() for layout in variants[0].output_layouts]:
            raise _disagree(where, sub.outputs, [variants[0].output_layouts, variant.output_layouts], "written")
    # the host walks every input but the tensor lists with one description (hostgen.emit.call_specs)
    walked = [tuple(layout for layout in v.input_layouts if not layout.is_tensor_list) for v in variants]
    names = tuple(name for name, layout in zip(sub.inputs, variants[0].input_layouts) if not layout.is_tensor_list)
    for other in walked[1:]:
        if [layout.signature() for layout in other] != [layout.signature() for layout in walked[0]]:
            raise _disagree(where, names, [walked[0], other], "read")
    return variants


#: a Python number's part of a variant key, by its type (the host's ``_rank`` gives the same): a number
#: whose type differs between paths (``scale = 2`` on one, ``0.5`` on the other) gets one variant per
#: type, each with ports of its own dtype, since no one port dtype is exact for every type and ``2 * t``
#: and ``0.5 * t`` differ in more than the value (an int tensor's product stays int)
NUMBER_RANKS = {float: -1, int: -2, bool: -3}


def _ranks(names: tuple[str, ...], values: tuple[Any, ...], layouts: tuple[Layout, ...]) -> dict[str, int]:
    """The rank of every input that is one port: a tensor's ``dim()``, a number's ``NUMBER_RANKS``."""
    return {name: value.dim() if isinstance(value, torch.Tensor) else NUMBER_RANKS[type(value)]
            for name, value, layout in zip(names, values, layouts)
            if layout.is_port and (isinstance(value, torch.Tensor) or type(value) in NUMBER_RANKS)}


class _Where:
    """The user's line of the statement of ``sub`` that reads or writes a variable."""

    def __init__(self, sub: SubDNN, locations: LocationTable) -> None:
        self.sub = sub
        self.locations = locations

    def statement(self, name: str, role: str) -> cst.SimpleStatementLine:
        statements = self.sub.statements if role == "read" else tuple(reversed(self.sub.statements))
        names = read_names if role == "read" else bound_names
        return next((s for s in statements if name in names(s)), self.sub.statements[0])

    def location(self, name: str, role: str) -> SourceLocation | None:
        return self.locations.resolve(self.statement(name, role))


def _layouts(names: tuple[str, ...], values: tuple[Any, ...], where: _Where, role: str) -> tuple[Layout, ...]:
    layouts = []
    for name, value in zip(names, values):
        try:
            layouts.append(layout_of(value))
        except NotAPortValue as error:
            inner = "" if error.value is value and error.kind is type(value) else f" (inside a {type(value).__name__})"
            raise UnsupportedError(
                f"a value of type {error.kind.__name__}{inner} in `{name}`, passed between compiled "
                "parts of forward()", where.location(name, role), _HINT) from None
    return tuple(layouts)


def _agreed(names: tuple[str, ...], layouts: list[tuple[Layout, ...]], where: _Where,
            role: str) -> tuple[Layout, ...]:
    first = layouts[0]
    for other in layouts[1:]:
        if [layout.signature() for layout in other] != [layout.signature() for layout in first]:
            raise _disagree(where, names, [first, other], role)
    return first


def _disagree(where: _Where, names: tuple[str, ...], layouts: list[tuple[Layout, ...]],
              role: str) -> UnsupportedError:
    a, b = layouts[0], layouts[1]
    name = next((n for n, x, y in zip(names, a, b) if x.signature() != y.signature()), names[0])
    index = names.index(name)
    kinds = str(a[index].spec) == str(b[index].spec)  # one structure: the numbers in it differ in type
    return UnsupportedError(
        f"`{name}` with a different structure on two paths that reach this line "
        f"({_shape_of(a[index], kinds)} on one, {_shape_of(b[index], kinds)} on another)",
        where.location(name, role),
        "give the value one structure on every path (the same list length, dict keys and fields; the same "
        "device, dtype or string; numbers inside it of one Python type, e.g. `float(v)`), or keep the changing "
        "part in a tensor; a string or other value chosen by "
        "data may pick a member of a container dycl can see (`self.heads[key](x)`, `ACTIVATIONS[name](h)`) "
        "or be used in the branches that chose it")


def _dtypes(value: Any) -> tuple:
    """The dtypes of the tensors in ``value`` (in a tensor, list, tuple or dict), in order."""
    if isinstance(value, torch.Tensor):
        return (value.dtype,)
    if isinstance(value, (list, tuple)):
        return tuple(d for item in value for d in _dtypes(item))
    if isinstance(value, dict):
        return tuple(d for item in value.values() for d in _dtypes(item))
    return ()


def _same_dtypes(names: tuple[str, ...], examples: list[tuple[Any, ...]], where: _Where) -> None:
    """Refuse an input whose tensors have another dtype on another path: one graph is exported
    for one dtype (a test of it, ``h.dtype == torch.half``, is folded in), and a call with the
    other would run it on values it was not exported for."""
    for index, name in enumerate(names):
        seen = [_dtypes(values[index]) for values in examples]
        other = next((dtypes for dtypes in seen[1:] if dtypes != seen[0]), None)
        if other is None:
            continue
        first, second = (_listed(dtypes) for dtypes in (seen[0], other))
        raise UnsupportedError(
            f"`{name}` with a different dtype on two paths that reach this line ({first} on one, {second} on "
            "another)", where.location(name, "read"),
            "give it one dtype on every path (convert it with .to(dtype) where the paths join), or use it "
            "within the branches that chose its dtype")


def _listed(dtypes: tuple) -> str:
    return str(dtypes[0]) if len(dtypes) == 1 else "[" + ", ".join(map(str, dtypes)) + "]"


def _shape_of(layout: Layout, kinds: bool = False) -> str:
    """How ``layout`` is described in a refusal; ``kinds``: with the kinds of the ports it holds."""
    if layout.spec is None:
        leaf = layout.leaves[0]
        return f"a {leaf}" if isinstance(leaf, str) else repr(leaf.value) if isinstance(leaf, Static) else (
            "a static value")
    ports = [leaf for leaf in layout.leaves if isinstance(leaf, str)]
    held = f" holding {', '.join(ports[:4])}{', ...' if len(ports) > 4 else ''}" if kinds and ports else ""
    return f"a {layout.spec.type.__name__} of {layout.spec.num_children}{held}"


def _index_lengths(inputs: tuple[Port, ...], outputs: tuple[Port, ...], indexes: frozenset[str],
                   examples: list[tuple[Any, ...]], sub: SubDNN) -> tuple[tuple[Port, ...], tuple[Port, ...]]:
    """The ports with each index list's length symbolic (``hcfg.list_indices``), and the output dims
    of one of the examples' lengths too (``h[keep]``'s rows): a length is one per call, not the example's."""
    lengths = {len(values[sub.inputs.index(name)]) for values in examples for name in indexes}
    fresh = {}

    def symbolic(port: Port, axes) -> Port:
        dims = list(port.shape)
        for axis in axes:
            if isinstance(dims[axis], int):
                dims[axis] = fresh.setdefault((port.name, axis), f"{port.name.replace(':', '_')}_length{axis}")
        return replace(port, shape=tuple(dims))

    inputs = tuple(symbolic(port, [0]) if port.name in indexes else port for port in inputs)
    outputs = tuple(symbolic(port, [axis for axis, dim in enumerate(port.shape) if dim in lengths])
                    if port.kind == "tensor" else port for port in outputs)
    return inputs, outputs


def _flat(values: tuple[Any, ...], layouts: tuple[Layout, ...]) -> list[tuple[str, Any]]:
    """(port kind, tensor) of every port of ``values``."""
    flat = []
    for value, layout in zip(values, layouts):
        flat += list(zip(_port_kinds(layout), port_values(value, layout)))
    return flat


def _port_kinds(layout: Layout) -> list[str]:
    kinds: list[str] = []
    for leaf in layout.leaves:
        if isinstance(leaf, str):
            kinds.append(leaf)
        elif isinstance(leaf, Record):
            kinds += _port_kinds(leaf.layout)
    return kinds


def _port_names(names: tuple[str, ...], layouts: tuple[Layout, ...]) -> list[str]:
    ports = []
    for name, layout in zip(names, layouts):
        ports += [name] if layout.is_port else [f"{name}_{i}" for i in range(layout.port_count)]
    return ports


def _flat_shapes(values: tuple[Any, ...], layouts: tuple[Layout, ...], shapes: SymbolicShapes) -> list[tuple | None]:
    """The named symbolic shape of every port of ``values`` (None for a scalar, or for all
    when the symbolic values do not have the concrete ones' layout)."""
    count = sum(layout.port_count for layout in layouts)
    flat: list[tuple | None] = []
    try:
        for value, layout in zip(values, layouts):
            flat += [shapes.shape(leaf) for leaf in leaf_values(value, layout)]
    except (ValueError, TypeError, AttributeError):
        return [None] * count
    named = all(shape is None or all(isinstance(d, int | str) for d in shape) for shape in flat)
    return flat if named and len(flat) == count else [None] * count


def _ports(names: list[str], flat_examples: list[list[tuple[str, Any]]], prefix: str, role: str,
           named: list[list[tuple | None]] | None = None) -> tuple[Port, ...]:
    first = flat_examples[0]
    ports = []
    for position, (name, (kind, tensor)) in enumerate(zip(names, first)):
        shapes = [tuple(example[position][1].shape) for example in flat_examples]
        symbolic = [example[position] for example in named] if named else []
        dims: list[int | str] = []
        for axis, size in enumerate(shapes[0]):
            same = all(len(s) == len(shapes[0]) and s[axis] == size for s in shapes)
            fresh = f"{prefix}_{role}{position}_d{axis}"
            if symbolic and all(s is not None and len(s) == len(shapes[0]) for s in symbolic):
                # one expression on every path: its name; predecessors that disagree: a fresh name
                agreed = {s[axis] for s in symbolic}
                dims.append(agreed.pop() if len(agreed) == 1 and same else fresh)
            else:
                dims.append(size if same else fresh)
        ports.append(Port(name, kind, dtype_name(tensor.dtype), tuple(dims)))
    return tuple(ports)


__all__ = ["variants_of"]
