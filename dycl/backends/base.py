"""The interface every backend implements."""

from __future__ import annotations

from typing import Any, Protocol

from dycl.subdnn import SubDNNModule, Variant


class Backend(Protocol):
    name: str
    file_suffix: str
    #: source defining ``load_executable(data: bytes, entry: dict)`` in the generated host
    runtime: str
    #: whether a saved artifact can run without torch
    standalone: bool

    def compile(self, module: SubDNNModule, variant: Variant) -> bytes: ...

    def executable(self, data: bytes, entry: dict[str, Any], module: SubDNNModule): ...


def get_backend(name: str) -> Backend:
    if name == "onnxruntime":
        from dycl.backends.onnxruntime import OnnxRuntimeBackend

        return OnnxRuntimeBackend()
    if name == "torch":
        from dycl.backends.torch import TorchBackend

        return TorchBackend()
    raise ValueError(f"unknown backend {name!r}; choose 'onnxruntime' or 'torch'")
