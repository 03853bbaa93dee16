"""The backends by name (``dycl.compile(backend=...)``): the one place that imports them all."""

from __future__ import annotations

from typing import Any

from dycl.backends.base import Backend


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


__all__ = ["get_backend"]
