"""Backend: the sub-DNN modules run eagerly, to debug the split itself."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from dycl.backends import torch_runtime
from dycl.hcfg.ports import Variant
from dycl.hostgen.copies import copied
from dycl.hostgen.manifest import SubDNNEntry
from dycl.subdnn import SubDNNModule


class TorchBackend:
    name = "torch"
    file_suffix = ".txt"
    runtime = copied(torch_runtime.__file__)
    standalone = False

    def compile(self, module: SubDNNModule, variant: Variant) -> bytes:
        return module.source.encode()

    def executable(self, data: bytes, entry: SubDNNEntry, module: SubDNNModule):
        def run(*args: Any) -> list[np.ndarray]:
            tensors = [torch.as_tensor(np.asarray(a, dtype=p.dtype)) for a, p in zip(args, entry.inputs)]
            with torch.no_grad():
                return [t.numpy() for t in module(*tensors)]

        return run
