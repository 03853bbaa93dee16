"""The interface every backend implements."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from dycl.hcfg.ports import Variant
from dycl.hostgen.manifest import SubDNNEntry
from dycl.subdnn import SubDNNModule


class Backend(Protocol):
    name: str
    file_suffix: str
    #: source defining ``runtime_options(...)`` and ``load_executable(data: bytes, entry: SubDNNEntry,
    #: options)`` in the generated host (``entry``: the manifest's, read by attribute)
    runtime: str
    #: whether a saved artifact can run without torch
    standalone: bool

    def compile(self, module: SubDNNModule, variant: Variant) -> bytes: ...

    def executable(self, data: bytes, entry: SubDNNEntry, module: SubDNNModule): ...


def compile_all(backend: Backend, modules: Sequence[SubDNNModule], variants: Sequence[Variant],
                progress: Callable[[str], None] | None = None) -> list[bytes]:
    """Compile distinct sub-DNN variants, all at once where the backend can
    (``compile_many``: TVM builds them in parallel processes), else one by one."""
    many = getattr(backend, "compile_many", None)
    if many is not None:
        return many(modules, variants, progress)
    compiled = []
    for module, variant in zip(modules, variants):
        compiled.append(backend.compile(module, variant))
        if progress is not None:
            progress(variant.name)
    return compiled


def get_backend(name: str, **options: Any) -> Backend:
    """The backend called ``name``; ``options`` (None values ignored) go to its
    constructor: ``tvm`` takes ``tune_trials``, ``target``, ``schedule``, ``jobs``, ...;
    ``onnxruntime`` takes ``cache_dir`` (the export cache, ``dycl.backends.ort_cache``)."""
    options = {key: value for key, value in options.items() if value is not None}
    if name == "tvm":
        try:
            import tvm  # noqa: F401 - only to say clearly what is missing
        except ImportError as error:
            raise ImportError("backend='tvm' needs Apache TVM, an optional extra of dycl: "
                              "pip install 'dycl[tvm]'") from error
        from dycl.backends.tvm import TvmBackend

        return TvmBackend(**options)
    if name == "onnxruntime" and set(options) <= {"cache_dir"}:
        from dycl.backends.onnxruntime import OnnxRuntimeBackend

        return OnnxRuntimeBackend(**options)  # cache_dir: the export cache (dycl.backends.ort_cache)
    if options:
        accepted = " (onnxruntime takes only cache_dir)" if name == "onnxruntime" else ""
        raise ValueError(f"backend {name!r} takes no options, got {sorted(options)}{accepted}")
    if name == "torch":
        from dycl.backends.torch import TorchBackend

        return TorchBackend()
    raise ValueError(f"unknown backend {name!r}; choose 'onnxruntime', 'tvm' or 'torch'")
