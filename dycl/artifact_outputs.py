"""What the manifest and the sub-DNN files say about the compiled model: its
outputs, and where each sub-DNN comes from.

``output_specs`` runs the generated host once on the example, with every
sub-DNN executed eagerly by its own module (no backend, no user ``forward``),
and describes what it returns: the structure and dtypes are those of every call
(the host returns the same structure on every path only if the model does, so
they are the example's), the shapes are the example's (``example_shape``).
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
from dycl.per_sample import over_group
from dycl.rewriter.errors import UnsupportedError
from dycl.rewriter.locations import LocationTable, set_location
from dycl.subdnn import SubDNNModule


def output_specs(host_source: str, manifest: Manifest, modules: Mapping[str, SubDNNModule],
                 constants: Mapping[str, torch.Tensor], example_args: tuple,
                 specialized: dict[str, Any], locations: LocationTable | None = None) -> tuple[Output, ...]:
    """The manifest's output table: one entry per array or Python value the model
    returns for the example, named as ``host.py`` names them in its ``.npz``. Raises
    ``UnsupportedError`` for an output the host holds only as a stand-in (``_check_plain``)."""
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
    # the flat inputs, then the compiled-in arguments (the call form is __call__'s business)
    returned, _ = host.split_written_inputs(getattr(model, FORWARD)(*args, **specialized), manifest)
    _check_plain(returned, host, locations or LocationTable())
    for name, value in host.flat_outputs(returned):
        if isinstance(value, (np.ndarray, np.generic)):
            specs.append(Output(name, "tensor", str(value.dtype), tuple(np.shape(value))))
        else:
            specs.append(Output(name, type(value).__name__))
    return tuple(specs)


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
