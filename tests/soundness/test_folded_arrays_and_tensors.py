"""Constants a model holds outside its parameters and buffers, written in place after compiling:
a module-level numpy array read in ``forward`` (``MEAN``), a numpy array held as a module
attribute, and a tensor held as a plain attribute (not registered as a buffer). The compiled
code folded their values; before the fix the in-process model kept answering with them (20 of
20 inputs wrong for each, the lead's hunt, s13). Now each call after the write is refused
(``dycl.in_process.array_guard``, ``dycl.in_process.staleness``); an array written back to its
old bytes is accepted again."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import dycl
from dycl.in_process.config_guard import StaleConfigError
from dycl.in_process.globals_guard import StaleGlobalsError
from dycl.in_process.staleness import StaleWeightsError

pytestmark = pytest.mark.filterwarnings("ignore")

MEAN = np.array([0.5, 0.5, 0.5, 0.5], dtype=np.float32)


class GlobalMean(nn.Module):
    """Normalises by a module-level numpy constant, as preprocessing code often does."""

    def __init__(self) -> None:
        super().__init__()
        self.score = nn.Linear(4, 4)

    def forward(self, x):
        y = self.score(x - torch.from_numpy(MEAN))
        if y.mean() > 0:
            return y * 2
        return y - 1


class AttributeMean(GlobalMean):
    def __init__(self) -> None:
        super().__init__()
        self.mean = np.array([0.5, 0.5, 0.5, 0.5], dtype=np.float32)

    def forward(self, x):
        y = self.score(x - torch.as_tensor(self.mean))
        if y.mean() > 0:
            return y * 2
        return y - 1


class PlainTensorShift(GlobalMean):
    def __init__(self) -> None:
        super().__init__()
        self.shift = torch.tensor([0.1, 0.2, 0.3, 0.4])  # a plain attribute, not a buffer

    def forward(self, x):
        y = self.score(x + self.shift)
        if y.mean() > 0:
            return y * 2
        return y - 1


def _inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(13)
    return [torch.randn(2, 4, generator=generator) for _ in range(20)]


def _compiled(cls):
    torch.manual_seed(0)
    model = cls().eval()
    inputs = _inputs()
    compiled = dycl.compile(model, inputs[0], progress=False)
    with torch.no_grad():
        for x in inputs:
            torch.testing.assert_close(compiled(x), model(x))
        paths = {bool(model(x).mean() > 0) for x in inputs}
    assert len(paths) == 2
    return model, compiled, inputs


def test_a_global_numpy_array_written_in_place_is_refused_then_accepted_back():
    model, compiled, inputs = _compiled(GlobalMean)
    MEAN[0] = 5.0
    try:
        with pytest.raises(StaleGlobalsError, match="'MEAN'"):
            compiled(inputs[0])
    finally:
        MEAN[0] = 0.5
    with torch.no_grad():
        torch.testing.assert_close(compiled(inputs[1]), model(inputs[1]))


def test_a_numpy_attribute_written_in_place_or_replaced_is_refused():
    model, compiled, inputs = _compiled(AttributeMean)
    model.mean[1] = -3.0
    with pytest.raises(StaleConfigError, match="model.mean"):
        compiled(inputs[0])
    model.mean[1] = 0.5
    with torch.no_grad():
        torch.testing.assert_close(compiled(inputs[1]), model(inputs[1]))
    model.mean = np.zeros(4, dtype=np.float32)
    with pytest.raises(StaleConfigError, match="model.mean"):
        compiled(inputs[0])


def test_a_plain_tensor_attribute_written_in_place_is_refused():
    model, compiled, inputs = _compiled(PlainTensorShift)
    model.shift.add_(3.0)
    with pytest.raises(StaleWeightsError, match="shift"):
        compiled(inputs[0])
