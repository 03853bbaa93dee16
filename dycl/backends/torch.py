"""Backend: the sub-DNN modules run eagerly, to debug the split itself."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from dycl.backends import torch_runtime
from dycl.backends.base import BackendBase, CompiledVariant, OnnxStep
from dycl.export.subdnn import SubDNNModule
from dycl.hcfg.ports import Variant
from dycl.hostgen.copies import copied
from dycl.hostgen.manifest import SubDNNEntry


class TorchBackend(BackendBase):
    name = "torch"
    file_suffix = ".txt"
    runtime = copied(torch_runtime.__file__)
    standalone = False

    def compile(self, module: SubDNNModule, variant: Variant, onnx_step: OnnxStep | None = None) -> CompiledVariant:
        """The sub-DNN's source, for reading (it runs as the module itself); nothing is exported,
        so ``onnx_step`` has nothing to apply to."""
        return CompiledVariant(f"{variant.name}{self.file_suffix}", module.source.encode())

    def executable(self, data: bytes, entry: SubDNNEntry, module: SubDNNModule):
        def run(*args: Any) -> list[np.ndarray]:
            tensors = [torch.as_tensor(np.asarray(a, dtype=p.dtype)) for a, p in zip(args, entry.inputs)]
            with torch.no_grad():
                return [t.numpy() for t in module(*tensors)]

        return run
