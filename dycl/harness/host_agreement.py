"""Assert that a compiled model agrees with eager PyTorch both in process and as a saved host run
in a torch-free process: the check most compile tests make. Kept apart from ``testing_host`` (which
the library's own self-check imports) so that importing it from ``dycl`` makes no import cycle."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from dycl.api import compile
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch


def assert_agrees_in_process_and_as_host(model: torch.nn.Module, inputs: list[Any], directory: Path,
                                         atol: float, min_paths: int = 1, **options: Any) -> int:
    """Compile ``model`` (``dycl.compile(model, inputs[0], **options)``), assert it agrees with eager on
    every input in process (``assert_equivalent``, at least ``min_paths`` paths) and as a saved host in a
    torch-free process (saved under ``directory``); returns the number of eager paths the inputs took."""
    model.eval()
    compiled = compile(model, inputs[0], **options)
    paths = assert_equivalent(model, compiled, inputs, min_paths=min_paths, atol=atol)
    report = run_host_without_torch(compiled.save(Path(directory) / "artifact"), model, inputs, atol)
    assert report["checked"] == len(inputs) and not report["problems"], report["problems"][:3]
    return paths


__all__ = ["assert_agrees_in_process_and_as_host"]
