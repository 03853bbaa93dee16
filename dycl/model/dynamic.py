"""Which input dimensions are symbolic: the ``dynamic=`` argument of ``dycl.compile``.

Accepted forms (``torch.onnx.export(dynamic_axes=...)`` and ``torch.export``'s
``Dim`` give the same choices):

- ``True`` or ``"batch"`` (the default): the batch is dim 0 of the first tensor
  input of rank ≥ 1; dim 0 of every tensor input whose leading size is the same in
  the example is the symbolic dim ``"batch"`` (one name: those inputs share the
  batch size). An input whose leading size differs (a bias of shape ``(2,)`` beside
  an ``x`` of ``(3, 2)``) does not carry the batch and stays static;
- ``False``: every dim static — the compile of the example's exact shapes;
- ``"all"``: every dim of every tensor input symbolic (dim 0 ``"batch"`` where
  the default names it, the others ``"<input>_d<axis>"``);
- a dict ``{input: {axis: name}}`` or ``{input: [axis, ...]}`` (input by
  parameter name or position; negative axes count from the end), on top of the
  default batch dim; an axis mapped to ``None`` stays static (``{"x": {0: None}}``
  turns the batch dim off). Equal names are the same dim: the host checks that
  inputs agree on it.

A dim named here can still end up static: shape propagation may prove it
constant (a conv fixes the channel count), and then the manifest records the
number.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

DynamicSpec = bool | str | Mapping[str | int, Any] | None
BATCH = "batch"
_AUTO = object()  # a dim listed without a name


def dynamic_dims(spec: DynamicSpec, parameters: Sequence[str], example_args: tuple,
                 groups: Mapping[str, Sequence[str]] | None = None) -> dict[str, dict[int, str]]:
    """``{parameter: {axis: dim name}}`` for the tensor inputs in ``example_args``
    (bound to ``parameters`` in order). Raises ValueError for a spec that names an
    unknown input, a non-tensor input, an axis out of range or an invalid name.
    ``groups``: forward()'s parameters whose value is several inputs (a KV cache:
    ``dycl.model.records``), by name: their dims apply to each of those inputs."""
    tensors = {name: value for name, value in zip(parameters, example_args) if isinstance(value, torch.Tensor)}
    if groups and isinstance(spec, Mapping):
        spec = _expand(spec, groups, tensors)
    if spec is False or spec is None:
        return {}
    if spec is True or spec == "batch":
        return _batch(tensors)
    if spec == "all":
        batch = _batch(tensors)
        return {name: {axis: batch.get(name, {}).get(axis, f"{name}_d{axis}") for axis in range(value.dim())}
                for name, value in tensors.items()}
    if isinstance(spec, str):
        raise ValueError(f"dynamic={spec!r}: expected True, False, 'batch', 'all' or a dict "
                         "{input: {axis: name}}")
    if not isinstance(spec, Mapping):
        raise ValueError(f"dynamic= takes True, False, 'batch', 'all' or a dict, got {type(spec).__name__}")
    dims = _batch(tensors)
    for key, axes in spec.items():
        name = _parameter(key, parameters)
        if name not in tensors:
            raise ValueError(f"dynamic: input {name!r} is not a tensor in the example input; only tensor "
                             "inputs have dims")
        rank = tensors[name].dim()
        chosen = dims.setdefault(name, {})
        for axis, dim_name in _axes(axes, name):
            position = axis + rank if axis < 0 else axis
            if not 0 <= position < rank:
                raise ValueError(f"dynamic: input {name!r} has rank {rank}, axis {axis} is out of range")
            if dim_name is _AUTO:
                dim_name = BATCH if position == 0 else f"{name}_d{position}"
            if dim_name is None:
                chosen.pop(position, None)
            elif not isinstance(dim_name, str) or not dim_name.isidentifier():
                raise ValueError(f"dynamic: dim names are identifiers, got {dim_name!r} for {name}[{axis}]")
            else:
                chosen[position] = dim_name
    return {name: chosen for name, chosen in dims.items() if chosen}


def static_sizes(spec: DynamicSpec, passed: Mapping[str, Any]) -> dict[str, tuple[int | None, ...]]:
    """Per tensor argument of the example call ``passed`` (parameter -> value), its size per dim where
    ``spec`` leaves the dim static, so that the compiled model refuses a call of another size there;
    None where the dim is symbolic. Empty where ``spec`` names inputs by position (``passed`` may
    lack a parameter left at its default, so positions are not its order) or is invalid (the
    compile reports that later): every size is then unknown, which is never wrong."""
    if isinstance(spec, Mapping) and any(not isinstance(key, str) for key in spec):
        return {}
    try:
        dims = dynamic_dims(spec, list(passed), tuple(passed.values()))
    except ValueError:
        return {}
    return {name: tuple(None if axis in dims.get(name, {}) else size for axis, size in enumerate(value.shape))
            for name, value in passed.items() if isinstance(value, torch.Tensor)}


def _expand(spec: Mapping[str | int, Any], groups: Mapping[str, Sequence[str]],
            tensors: Mapping[str, torch.Tensor]) -> dict[str | int, Any]:
    """``spec`` with each entry for a group of inputs given to every tensor of the group
    (a named dim every one of them has: a cache's ``{2: "past"}`` on each key and value)."""
    expanded: dict[str | int, Any] = {}
    for key, axes in spec.items():
        if not isinstance(key, str) or key not in groups or key in tensors:
            expanded[key] = axes
            continue
        pairs = _axes(axes, key)
        for name in groups[key]:
            if name in tensors and all(-tensors[name].dim() <= axis < tensors[name].dim() for axis, _ in pairs):
                expanded[name] = axes
    return expanded


def _batch(tensors: dict[str, torch.Tensor]) -> dict[str, dict[int, str]]:
    """Dim 0 named ``batch`` on the inputs whose leading size is the first input's: an
    input of another leading size cannot share that dim with it (naming it ``batch``
    would make the host refuse every call)."""
    leading = [value.shape[0] for value in tensors.values() if value.dim() >= 1]
    if not leading:
        return {}
    return {name: {0: BATCH} for name, value in tensors.items() if value.dim() >= 1 and value.shape[0] == leading[0]}


def _parameter(key: str | int, parameters: Sequence[str]) -> str:
    if isinstance(key, int) and not isinstance(key, bool):
        if not 0 <= key < len(parameters):
            raise ValueError(f"dynamic: input position {key} is out of range; forward() takes {list(parameters)}")
        return parameters[key]
    if key not in parameters:
        raise ValueError(f"dynamic: forward() has no input {key!r}; its inputs are {list(parameters)}")
    return key


def _axes(axes: Any, name: str) -> list[tuple[int, Any]]:
    if isinstance(axes, Mapping):
        pairs = list(axes.items())
    elif isinstance(axes, Sequence) and not isinstance(axes, str):
        pairs = [(axis, _AUTO) for axis in axes]
    else:
        raise ValueError(f"dynamic: the dims of {name!r} are given as {{axis: name}} or [axis, ...], got {axes!r}")
    for axis, _ in pairs:
        if not isinstance(axis, int) or isinstance(axis, bool):
            raise ValueError(f"dynamic: axes of {name!r} are ints, got {axis!r}")
    return pairs


__all__ = ["BATCH", "DynamicSpec", "dynamic_dims"]
