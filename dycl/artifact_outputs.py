"""What the manifest and the sub-DNN files say about the compiled model: its
outputs, and where each sub-DNN comes from.

``output_specs`` runs the generated host once on the example, with every
sub-DNN executed eagerly by its own module (no backend, no user ``forward``),
and describes what it returns: the structure and dtypes are those of every call
(the host returns the same structure on every path only if the model does, so
they are the example's), the shapes are the example's (``example_shape``).
"""

from __future__ import annotations

from typing import Any

import libcst as cst
import numpy as np
import torch

from dycl.backends.torch import TorchBackend
from dycl.per_sample import over_group
from dycl.subdnn import SubDNNModule, Variant


def output_specs(host_source: str, manifest: dict[str, Any], modules: dict[str, SubDNNModule],
                 constants: dict[str, torch.Tensor], example_args: tuple,
                 specialized: dict[str, Any]) -> list[dict[str, Any]]:
    """The manifest's output table: one entry per array or Python value the model
    returns for the example, named as ``host.py`` names them in its ``.npz``."""
    from dycl.compiler import load_host_module

    host = load_host_module(host_source)
    eager = TorchBackend()
    executables = {name: eager.executable(b"", entry, modules[name]) for name, entry in manifest["sub_dnns"].items()}
    if manifest.get("per_sample"):  # the host calls each sub-DNN on a group of samples
        executables = {name: over_group(executable) for name, executable in executables.items()}
    model = host.Model(executables, manifest, {key: value.numpy() for key, value in constants.items()})
    args = [a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else a for a in example_args]
    specs = []
    # _forward takes the flat inputs, then the compiled-in arguments (the call form is __call__'s business)
    for name, value in host.flat_outputs(model._forward(*args, **specialized)):
        if isinstance(value, (np.ndarray, np.generic)):
            specs.append({"name": name, "kind": "tensor", "dtype": str(value.dtype),
                          "example_shape": list(np.shape(value))})
        else:
            specs.append({"name": name, "kind": type(value).__name__})
    return specs


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
