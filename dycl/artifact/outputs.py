"""What the manifest and the sub-DNN files say about the compiled model: its
outputs, and where each sub-DNN comes from.

``output_specs`` describes what the model returns from what the explore walk recorded
at every ``Return`` (``hcfg.trace.Returned``): nothing runs the model or the host
again to learn it. The structure and dtypes are those of every call (the host returns
the same structure on every path only if the model does), the shapes are those of the
example's own path (``example_shape``) and, where the inputs have symbolic dims, the
same with those dims named (``shape``: ``[batch, 10]``, from the path's symbolic mirror:
a dim that is one of the inputs' named dims, or proven static). Names are those
``host.py`` gives in its ``.npz`` (``flat_outputs``: ``output_0``, ``output_1_0``, ...).

Before that, every path's returned value is checked: a value the host would hold only
as a stand-in (``_check_plain``) and a dict on the model that holds an array after the
call (``_check_state``) are refused, on whichever path returns them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import libcst as cst
import numpy as np
import sympy
import torch

from dycl.hcfg.ports import Variant
from dycl.hcfg.symbolic import SymbolicShapes, SymbolicTensor
from dycl.hcfg.trace import Returned
from dycl.hostgen.manifest import Manifest, Output
from dycl.per_sample.semantics import join
from dycl.rewriter.errors import UnsupportedError
from dycl.rewriter.locations import LocationTable
from dycl.rewriter.state_threading import ThreadedState
from dycl.rewriter.vocabulary import dtype_name


def output_specs(returns: Sequence[Returned], manifest: Manifest, shapes: SymbolicShapes | None,
                 locations: LocationTable | None = None,
                 state: Sequence[ThreadedState] = ()) -> tuple[Output, ...]:
    """The manifest's output table: one entry per array or Python value the model
    returns for the example, named as ``host.py`` names them in its ``.npz`` (where the
    explore walk could not follow the example's path to its end, the paths' common table,
    without shapes where they differ). Raises
    ``UnsupportedError`` for an output the host holds only as a stand-in (``_check_plain``)
    or a state dict that holds an array (``_check_state``), on any path. ``state``: the
    module state threaded through forward (``rewriter.state_threading``): each ``Return``
    then gives ``(outputs, final state)``."""
    locations = locations or LocationTable()
    for returned in returns:
        outputs, final = _split(returned.value, manifest, state)
        _check_state(state, final)
        _check_plain(outputs, returned.statement, locations)
    example = next((r for r in returns if r.example), None)
    if example is not None:
        return _table(example, manifest, shapes, state)
    # the example's path was not followed to its end: what every path agrees on
    tables = [_table(returned, manifest, shapes, state) for returned in returns]
    if not tables or all(table == tables[0] for table in tables):
        return tables[0] if tables else ()
    return tuple(dataclasses.replace(output, example_shape=None, shape=None) for output in tables[0])


def _table(returned: Returned, manifest: Manifest, shapes: SymbolicShapes | None,
           state: Sequence[ThreadedState]) -> tuple[Output, ...]:
    """The output table of one path's returned value."""
    outputs, _ = _split(returned.value, manifest, state)
    symbolic = None if returned.symbolic is None else _split(returned.symbolic, manifest, state)[0]
    if manifest.per_sample:  # the host joins the samples' outputs (dycl.per_sample.join): one sample here
        outputs, symbolic = join([outputs]), None
    named = _named_dims(manifest)
    specs = []
    for name, value, mirror in _flat(outputs, symbolic, "output"):
        if isinstance(value, torch.Tensor):
            specs.append(Output(name, "tensor", dtype_name(value.dtype), tuple(value.shape),
                                _symbolic_shape(tuple(value.shape), mirror, shapes, named)))
        elif isinstance(value, (np.ndarray, np.generic)):
            specs.append(Output(name, "tensor", str(value.dtype), tuple(np.shape(value)), None))
        else:
            specs.append(Output(name, type(value).__name__))
    return tuple(specs)


def _split(value: Any, manifest: Manifest, state: Sequence[ThreadedState]) -> tuple[Any, Any]:
    """``(what forward() returns, the final module state)`` from a ``Return``'s value:
    ``dycl.in_process.written_inputs`` pairs it with the inputs it updates, ``rewriter.state_threading``
    with the state."""
    if manifest.written_inputs:
        value = value[0]
    return value if state else (value, ())


def _flat(value: Any, mirror: Any, name: str) -> list[tuple[str, Any, Any]]:
    """``[(name, value, its mirror)]`` as the host's ``flat_outputs`` names them."""
    if isinstance(value, (tuple, list)):
        mirrors = mirror if isinstance(mirror, (tuple, list)) and len(mirror) == len(value) else [None] * len(value)
        return [item for position, (inner, other) in enumerate(zip(value, mirrors))
                for item in _flat(inner, other, f"{name}_{position}")]
    if isinstance(value, dict):
        mirrors = mirror if isinstance(mirror, dict) else {}
        return [item for key, inner in value.items() for item in _flat(inner, mirrors.get(key), f"{name}_{key}")]
    return [(name, value, mirror)]


def _named_dims(manifest: Manifest) -> frozenset[str] | None:
    """The inputs' symbolic dim names; None where there are none (or per-sample: the batch of
    samples is the host's, every sub-DNN sees one)."""
    names = frozenset(d for port in manifest.inputs for d in port.shape if isinstance(d, str))
    return None if manifest.per_sample or not names else names


def _symbolic_shape(example: tuple[int, ...], mirror: Any, shapes: SymbolicShapes | None,
                    named: frozenset[str] | None) -> tuple[int | str, ...] | None:
    """``example`` with each dim that is one of the inputs' named dims by its name, or None
    where a dim is anything else (an expression, a size from data) or disagrees with the
    example."""
    if named is None or shapes is None or not isinstance(mirror, (SymbolicTensor, torch.Tensor)):
        return None
    try:  # a fake tensor's dims are SymInts over its own run's symbols: none of the inputs' names
        dims = tuple(shapes.dim(d.node.expr if isinstance(d, torch.SymInt) else d) for d in mirror.shape)
    except TypeError:
        return None
    if len(dims) != len(example):
        return None
    for dim, size in zip(dims, example):
        if isinstance(dim, int) and dim != size:
            return None
        if isinstance(dim, str) and (dim not in named or shapes.examples.get(sympy.Symbol(
                dim, integer=True, positive=True)) != size):
            return None
    return tuple(dims)


def _check_state(state: Sequence[ThreadedState], final: Any) -> None:
    """Refuse a dict on the model that a call stores an array in: only dicts of numbers
    are compiled as state (``rewriter.state_slots``)."""
    for slot, value in zip(state, final):
        if slot.kind == "dict" and any(isinstance(item, (torch.Tensor, np.ndarray)) for item in value.values()):
            raise UnsupportedError(f"a tensor stored in the dict {slot.path} on the model inside forward()", None,
                                   "only dicts of bools, ints and floats on the model are compiled as state; "
                                   "keep tensors in buffers (register_buffer) or return them")


def _check_plain(value: Any, statement: cst.SimpleStatementLine, locations: LocationTable) -> None:
    """Refuse an output the host holds as a stand-in (a dataclass or namedtuple that crossed
    a compiled part or that host code built, a device or a dtype: ``hostgen.port_trees`` and
    ``hostgen.stand_ins``): returned as it is, the caller would get another type than the
    model's, silently. ``statement``: the ``return`` that gives ``value``."""
    stand_in = _stand_in(value)
    if stand_in is not None:
        raise UnsupportedError(
            f"returning a value that the compiled model holds only as a stand-in ({stand_in}: a "
            "device, dtype, dataclass or namedtuple that crossed between compiled parts of forward())",
            locations.resolve(statement),
            "return tensors and numbers (the object's fields), or an object whose fields are all tensors")
    if isinstance(value, list | tuple):
        for item in value:
            _check_plain(item, statement, locations)
    elif isinstance(value, dict):
        for item in value.values():
            _check_plain(item, statement, locations)


def _stand_in(value: Any) -> str | None:
    """The name of the host's stand-in for ``value`` (``hostgen.port_trees``'s table), None
    where the host holds the value itself."""
    if isinstance(value, torch.device):
        return "HostDevice"
    if isinstance(value, torch.dtype):
        return "HostDtype"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return type(value).__name__
    if isinstance(value, tuple) and hasattr(type(value), "_fields"):  # a namedtuple
        return type(value).__name__
    return None


def provenance(variant: Variant, shared_by: list[str], model: str) -> tuple[str, str, dict[str, str]]:
    """``(graph name, doc string, metadata)`` for the file of ``variant``: its HCFG
    node, the statements it computes with their source lines, and which variants
    (identical sub-DNNs) share the file."""
    lines = [cst.Module([statement]).code.rstrip() for statement in variant.sub.statements]
    where = [line.rsplit("# ", 1)[1] for line in lines if "  # " in line]
    doc = (f"dycl sub-DNN {variant.name} of {model} (HCFG node {variant.sub.name}); computes:\n"
           + "\n".join(lines))
    metadata = {"dycl.hcfg_node": variant.sub.name, "dycl.sub_dnn": variant.name, "dycl.model": model,
                "dycl.source_lines": ", ".join(where), "dycl.shared_by": ", ".join(shared_by)}
    return variant.name, doc, metadata


__all__ = ["output_specs", "provenance"]
