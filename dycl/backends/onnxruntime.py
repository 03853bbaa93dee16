"""Backend: ONNX export of each sub-DNN (checked: ``dycl.backends.onnx_export``), run with ONNX Runtime."""

from __future__ import annotations

from dycl.backends import ort_runtime
from dycl.backends.onnx_export import export_onnx
from dycl.hcfg.ports import Variant
from dycl.hostgen.copies import copied
from dycl.hostgen.manifest import ShapeGuard, SubDNNEntry
from dycl.subdnn import SubDNNModule


class OnnxRuntimeBackend:
    name = "onnxruntime"
    file_suffix = ".onnx"
    runtime = copied(ort_runtime.__file__)
    standalone = True

    def __init__(self) -> None:
        self._shown_warnings: set[tuple[str, str, int]] = set()  # passed on once per compile
        #: variant name -> the shape conditions its graph needs (``dycl.shape_guards``), for the manifest
        self.guards: dict[str, tuple[ShapeGuard, ...]] = {}

    def compile(self, module: SubDNNModule, variant: Variant, static: bool = False) -> bytes:
        """The ONNX bytes of ``variant``; ``static``: at its first example's exact shapes."""
        dynamic_axes = {}
        for port in () if static else (*variant.inputs, *variant.outputs):
            symbolic = {axis: dim for axis, dim in enumerate(port.shape) if isinstance(dim, str)}
            if symbolic:
                dynamic_axes[port.name] = symbolic
        guards: list[ShapeGuard] = []
        data = export_onnx(module, variant, dynamic_axes or None, self._shown_warnings, guards=guards)
        if not static:
            self.guards[variant.name] = tuple(guards)
        return data

    def executable(self, data: bytes, entry: SubDNNEntry, module: SubDNNModule):
        return ort_runtime.load_executable(data, entry)


def session_options():
    """Options for any other ONNX Runtime session in a process that runs dycl hosts
    (they share one global thread pool)."""
    return ort_runtime.session_options_for()
