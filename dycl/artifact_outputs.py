"""What the manifest and the sub-DNN files say about the compiled model: its
outputs, and where each sub-DNN comes from.

``output_specs`` runs the generated host once on the example, with every
sub-DNN executed eagerly by its own module (no backend, no user ``forward``),
and describes what it returns: the structure and dtypes are those of every call
(the host returns the same structure on every path only if the model does, so
they are the example's), the shapes are the example's (``example_shape``) and, where
the inputs have symbolic dims, the same with those dims named (``shape``: ``[batch, 10]``).
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Mapping
from typing import Any

import libcst as cst
import numpy as np
import torch

from dycl import host_module
from dycl.backends.torch import TorchBackend
from dycl.hcfg.ports import Variant
from dycl.hostgen.manifest import Manifest, Output
from dycl.hostgen.names import FORWARD
from dycl.per_sample.semantics import over_group
from dycl.rewriter.errors import UnsupportedError
from dycl.rewriter.locations import LocationTable, set_location
from dycl.subdnn import SubDNNModule


def output_specs(host_source: str, manifest: Manifest, modules: Mapping[str, SubDNNModule],
                 constants: Mapping[str, torch.Tensor], example_args: tuple,
                 specialized: dict[str, Any], locations: LocationTable | None = None,
                 state: bool = False) -> tuple[Output, ...]:
    """The manifest's output table: one entry per array or Python value the model
    returns for the example, named as ``host.py`` names them in its ``.npz``. Raises
    ``UnsupportedError`` for an output the host holds only as a stand-in (``_check_plain``).
    ``state``: the host threads module state, so ``FORWARD`` returns ``(outputs, state)``."""
    from dycl.guard_alternatives import module_of

    host = host_module.load_host_module(host_source)
    eager = TorchBackend()
    executables = {name: eager.executable(b"", entry, module_of(modules, name))
                   for name, entry in manifest.sub_dnns.items()}
    if manifest.per_sample:  # the host calls each sub-DNN on a group of samples
        executables = {name: over_group(executable) for name, executable in executables.items()}
    model = host.Model(executables, manifest, {key: value.numpy() for key, value in constants.items()})
    args = [a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else a for a in example_args]
    specs = []
    def outputs(*arrays: Any) -> tuple[Any, Any]:
        """What the host returns for ``arrays`` (the flat inputs; the compiled-in arguments are
        __call__'s business), and the final module state (``rewriter.state_threading``)."""
        returned, _ = host.split_written_inputs(getattr(model, FORWARD)(*arrays, **specialized), manifest)
        return returned if state else (returned, None)

    returned, final = outputs(*args)
    if state:
        _check_state(host, final)
    _check_plain(returned, host, locations or LocationTable())
    flat = host.flat_outputs(returned)
    symbolic = {} if manifest.per_sample else _symbolic_shapes(
        lambda *bigger: host.flat_outputs(outputs(*bigger)[0]), manifest, args, flat)
    for name, value in flat:
        if isinstance(value, (np.ndarray, np.generic)):
            specs.append(Output(name, "tensor", str(value.dtype), tuple(np.shape(value)), symbolic.get(name)))
        else:
            specs.append(Output(name, type(value).__name__))
    return tuple(specs)


def _symbolic_shapes(run: Any, manifest: Manifest, args: list, flat: list) -> dict[str, tuple[int | str, ...]]:
    """Output name -> its shape with symbolic dims named: the host runs again with every
    symbolic input dim doubled (each input repeated along it), and an output dim that
    doubled with exactly one symbol is that symbol; one that stayed is static. Outputs
    whose dims cannot be told that way (or a run that fails at the larger sizes) get none.
    The shapes are those of the example's path at both sizes."""
    if len(args) != len(manifest.inputs) or not any(isinstance(d, str) for p in manifest.inputs for d in p.shape):
        return {}
    sizes: dict[str, tuple[int, int]] = {}
    bigger = list(args)
    for position, port in enumerate(manifest.inputs):
        for axis, dim in enumerate(port.shape):
            if isinstance(dim, str) and isinstance(bigger[position], np.ndarray):
                sizes.setdefault(dim, (args[position].shape[axis], 2 * args[position].shape[axis]))
                bigger[position] = np.concatenate([bigger[position]] * 2, axis=axis)
    try:
        again = dict(run(*bigger))
    except Exception:  # noqa: BLE001 - a model that cannot take the larger sizes: example shapes only
        return {}
    found = {}
    for name, value in flat:
        other = again.get(name)
        if not isinstance(value, np.ndarray) or not isinstance(other, np.ndarray) or value.ndim != other.ndim:
            continue
        dims: list[int | str] = []
        for small, large in zip(value.shape, other.shape):
            names = [symbol for symbol, pair in sizes.items() if pair == (small, large)]
            if small == large:
                dims.append(small)
            elif len(names) == 1:
                dims.append(names[0])
            else:
                break
        else:
            found[name] = tuple(dims)
    return found


def _check_state(host: Any, final: tuple) -> None:
    """Refuse a dict on the model that the example's call stored an array in: only dicts of numbers
    are compiled as state (``rewriter.state_slots``)."""
    for (_, path, kind, _), value in zip(host.STATE, final):
        if kind == "dict" and any(isinstance(item, np.ndarray) for item in value.values()):
            raise UnsupportedError(f"a tensor stored in the dict {path} on the model inside forward()", None,
                                   "only dicts of bools, ints and floats on the model are compiled as state; "
                                   "keep tensors in buffers (register_buffer) or return them")


def _check_plain(value: Any, host: Any, locations: LocationTable) -> None:
    """Refuse an output the host holds as a stand-in (a dataclass or namedtuple that crossed
    a compiled part with Python numbers in it, ``hostgen.port_trees`` and ``hostgen.stand_ins``):
    returned as it is, the caller would get another type than the model's, silently."""
    if isinstance(value, types.SimpleNamespace) or type(value).__module__ == host.__name__:
        returns = [line for line in inspect.getsource(getattr(host.Model, FORWARD)).splitlines()
                   if line.strip().startswith("return ") and "  # " in line]
        # the first return of forward(): the host does not say which one the example took
        comment = cst.Comment("# " + returns[0].rsplit("  # ", 1)[1].strip()) if returns else None
        where = locations.resolve(set_location(cst.SimpleStatementLine([cst.Pass()]), comment))
        raise UnsupportedError(
            f"returning a value that the compiled model holds only as a stand-in ({type(value).__name__}: a "
            "device, dtype, dataclass or namedtuple that crossed between compiled parts of forward())", where,
            "return tensors and numbers (the object's fields), or an object whose fields are all tensors")
    if isinstance(value, list | tuple):
        for item in value:
            _check_plain(item, host, locations)
    elif isinstance(value, dict):
        for item in value.values():
            _check_plain(item, host, locations)


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
