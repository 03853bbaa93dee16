"""Backend: ONNX export of each sub-DNN (checked: ``dycl.backends.onnx_export``), run with ONNX Runtime.

``cache_dir`` (or ``DYCL_CACHE_DIR``) opts in to the content-addressed export cache
(``dycl.backends.ort_cache``)."""

from __future__ import annotations

import os

from dycl.backends import ort_runtime
from dycl.backends.base import BackendBase, CompiledVariant, OnnxStep
from dycl.backends.onnx_export import export_onnx
from dycl.backends.ort_cache import cache_from
from dycl.export.subdnn import SubDNNModule
from dycl.hcfg.ports import Variant
from dycl.hostgen.copies import copied
from dycl.hostgen.manifest import ShapeGuard, SubDNNEntry


class OnnxRuntimeBackend(BackendBase):
    name = "onnxruntime"
    file_suffix = ".onnx"
    runtime = copied(ort_runtime.__file__)
    standalone = True
    runs_onnx_scan = True

    def __init__(self, cache_dir: str | os.PathLike | None = None) -> None:
        super().__init__()
        self._shown_warnings: set[tuple[str, str, int]] = set()  # passed on once per compile
        self.cache = cache_from(cache_dir)  # None unless asked for

    def compile(self, module: SubDNNModule, variant: Variant, onnx_step: OnnxStep | None = None) -> CompiledVariant:
        """``variant`` exported to ONNX (at symbolic shapes where its ports have them), through ``onnx_step``."""
        data, guards, cached = self.export(module, variant)
        data = onnx_step(data, variant) if onnx_step is not None else data
        return CompiledVariant(f"{variant.name}{self.file_suffix}", data, guards, {"export_cache_hit": cached})

    def export(self, module: SubDNNModule, variant: Variant,
               static: bool = False) -> tuple[bytes, tuple[ShapeGuard, ...], bool]:
        """``(ONNX bytes, shape guards, from the cache)`` of ``variant``; ``static``: at its first
        example's exact shapes (which need no guards: the caller checks the shapes)."""
        dynamic_axes = {}
        for port in () if static else (*variant.inputs, *variant.outputs):
            symbolic = {axis: dim for axis, dim in enumerate(port.shape) if isinstance(dim, str)}
            if symbolic:
                dynamic_axes[port.name] = symbolic
        key = self.cache.key(module, variant, static) if self.cache is not None else None
        found = self.cache.get(key) if key is not None else None
        if found is not None:
            return found[0], () if static else tuple(found[1]), True
        guards: list[ShapeGuard] = []
        data = export_onnx(module, variant, dynamic_axes or None, self._shown_warnings, guards=guards)
        if key is not None:
            self.cache.put(key, data, tuple(guards))
        return data, () if static else tuple(guards), False

    def executable(self, data: bytes, entry: SubDNNEntry, module: SubDNNModule):
        return ort_runtime.load_executable(data, entry)


def session_options():
    """Options for any other ONNX Runtime session in a process that runs dycl hosts
    (they share one global thread pool)."""
    return ort_runtime.session_options_for()
