"""Backend: ONNX export of each sub-DNN, run with ONNX Runtime."""

from __future__ import annotations

import functools
import io
import warnings
from typing import Any

import torch

from dycl.backends.ort_runtime import RUNTIME
from dycl.subdnn import SubDNNModule, Variant


class OnnxRuntimeBackend:
    name = "onnxruntime"
    file_suffix = ".onnx"
    runtime = RUNTIME
    standalone = True

    def compile(self, module: SubDNNModule, variant: Variant, static: bool = False) -> bytes:
        """The ONNX bytes of ``variant``; ``static``: at its first example's exact shapes."""
        dynamic_axes = {}
        for port in () if static else (*variant.inputs, *variant.outputs):
            symbolic = {axis: dim for axis, dim in enumerate(port.shape) if isinstance(dim, str)}
            if symbolic:
                dynamic_axes[port.name] = symbolic
        buffer = io.BytesIO()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                module, variant.examples[0], buffer, dynamo=False, opset_version=17,
                input_names=[p.name for p in variant.inputs], output_names=[p.name for p in variant.outputs],
                dynamic_axes=dynamic_axes or None, do_constant_folding=True,
            )
        return buffer.getvalue()

    def executable(self, data: bytes, entry: dict[str, Any], module: SubDNNModule):
        return _runtime()["load_executable"](data, entry)


@functools.cache
def _runtime() -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec("import numpy as np\n" + RUNTIME, namespace)  # noqa: S102 - our own runtime snippet
    return namespace


def session_options():
    """Options for any other ONNX Runtime session in a process that runs dycl hosts
    (they share one global thread pool)."""
    return _runtime()["_session_options"]()
