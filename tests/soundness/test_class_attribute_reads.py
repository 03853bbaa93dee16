"""A class constant read through the class's name (``Detector.SCORE_THRESHOLD``), changed after
compiling: the compiled code folded the old value. Before the fix the in-process model kept
answering with it (20 of 20 inputs wrong in the lead's hunt, s13); now the call is refused with
``StaleGlobalsError`` naming the attribute, and runs again once the value is put back."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import dycl
from dycl.in_process.globals_guard import StaleGlobalsError

pytestmark = pytest.mark.filterwarnings("ignore")


class Detector(nn.Module):
    """Scores boxes and keeps the confident ones, with its thresholds as class constants."""

    SCORE_THRESHOLD = 0.0
    SCALE = 1.0

    def __init__(self) -> None:
        super().__init__()
        self.score = nn.Linear(4, 4)

    def forward(self, x):
        scores = self.score(x) * Detector.SCALE
        if scores.mean() > Detector.SCORE_THRESHOLD:
            return scores * 2
        return scores - 1


class WideDetector(Detector):
    """A subclass whose forward reads the constants through its own name."""

    def forward(self, x):
        scores = self.score(x) * WideDetector.SCALE
        if scores.mean() > WideDetector.SCORE_THRESHOLD:
            return scores * 2
        return scores - 1


def _inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(11)
    return [torch.randn(2, 4, generator=generator) for _ in range(20)]


def _agree(model, compiled, inputs) -> int:
    with torch.no_grad():
        for x in inputs:
            torch.testing.assert_close(compiled(x), model(x))
        return len({bool(model.score(x).mean() * type(model).SCALE > type(model).SCORE_THRESHOLD) for x in inputs})


@pytest.fixture(autouse=True)
def _constants_restored():
    yield
    Detector.SCORE_THRESHOLD, Detector.SCALE = 0.0, 1.0
    for name in ("SCORE_THRESHOLD", "SCALE"):
        if name in vars(WideDetector):
            delattr(WideDetector, name)


def test_a_class_constant_changed_after_compiling_is_refused_then_accepted_back():
    torch.manual_seed(0)
    model = Detector().eval()
    inputs = _inputs()
    compiled = dycl.compile(model, inputs[0], progress=False)
    assert _agree(model, compiled, inputs) == 2
    Detector.SCALE = -2.0
    with pytest.raises(StaleGlobalsError, match="'SCALE' in class Detector"):
        compiled(inputs[0])
    Detector.SCALE = 1.0
    Detector.SCORE_THRESHOLD = 0.3
    with pytest.raises(StaleGlobalsError, match="'SCORE_THRESHOLD' in class Detector"):
        compiled(inputs[0])
    Detector.SCORE_THRESHOLD = 0.0  # an equal value again: the compiled code is right once more
    assert _agree(model, compiled, inputs) == 2


def test_a_subclass_shadowing_a_base_constant_is_refused():
    torch.manual_seed(0)
    model = WideDetector().eval()
    inputs = _inputs()
    compiled = dycl.compile(model, inputs[0], progress=False)
    assert _agree(model, compiled, inputs) == 2
    WideDetector.SCALE = 3.0  # set on the subclass: the base's value is unchanged
    with pytest.raises(StaleGlobalsError, match="'SCALE' in class WideDetector"):
        compiled(inputs[0])
