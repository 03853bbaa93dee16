"""Backend: the sub-DNN modules run eagerly, to debug the split itself."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from dycl.hcfg.ports import Variant
from dycl.hostgen.manifest import SubDNNEntry
from dycl.subdnn import SubDNNModule

RUNTIME = '''
def runtime_options(threads=None, providers=None, session_options=None, shared_pool=None):
    return None


def load_executable(data, entry, options=None):
    raise RuntimeError("this artifact was compiled with backend='torch', which runs only in-process; "
                       "compile with backend='onnxruntime' to deploy")
'''


class TorchBackend:
    name = "torch"
    file_suffix = ".txt"
    runtime = RUNTIME
    standalone = False

    def compile(self, module: SubDNNModule, variant: Variant) -> bytes:
        return module.source.encode()

    def executable(self, data: bytes, entry: SubDNNEntry, module: SubDNNModule):
        def run(*args: Any) -> list[np.ndarray]:
            tensors = [torch.as_tensor(np.asarray(a, dtype=p.dtype)) for a, p in zip(args, entry.inputs)]
            with torch.no_grad():
                return [t.numpy() for t in module(*tensors)]

        return run
