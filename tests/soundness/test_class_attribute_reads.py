"""Python values the compiled code folded, changed after compiling without rebinding a global:
a class constant read through the class's name (``Detector.SCORE_THRESHOLD``) or through the
instance's class (``type(self).SCALE``, ``self.__class__.SCALE``), and a global config dict or
list changed in place (``CONFIG["scale"] = 2.0``). Before the fix the in-process model kept
answering with the old values (20 of 20 inputs wrong for each of the four, in the lead's hunt,
s13); now the call is refused with ``StaleGlobalsError`` naming the value, and runs again once
the value is put back (``dycl.in_process.globals_guard``)."""

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


class SelfClassDetector(Detector):
    """Reads its constants through ``type(self)`` and ``self.__class__``, as subclass-friendly code does."""

    def forward(self, x):
        scores = self.score(x) * type(self).SCALE
        if scores.mean() > self.__class__.SCORE_THRESHOLD:
            return scores * 2
        return scores - 1


CONFIG = {"scale": 1.0, "threshold": 0.0}
WEIGHTS = [1.0, 1.0]


class ConfiguredDetector(Detector):
    """Reads a module-level config dict and list, as research code reads its ``CONFIG``."""

    def forward(self, x):
        scores = self.score(x) * CONFIG["scale"]
        for weight in WEIGHTS:
            scores = scores * weight
        if scores.mean() > CONFIG["threshold"]:
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
    CONFIG.update(scale=1.0, threshold=0.0)
    WEIGHTS[:] = [1.0, 1.0]
    for cls in (WideDetector, SelfClassDetector):
        for name in ("SCORE_THRESHOLD", "SCALE"):
            if name in vars(cls):
                delattr(cls, name)


def _compiled(cls: type[nn.Module]):
    torch.manual_seed(0)
    model = cls().eval()
    inputs = _inputs()
    compiled = dycl.compile(model, inputs[0], progress=False)
    assert _agree(model, compiled, inputs) == 2
    return model, compiled, inputs


@pytest.mark.parametrize("cls", [Detector, SelfClassDetector])
def test_a_class_constant_changed_after_compiling_is_refused_then_accepted_back(cls):
    model, compiled, inputs = _compiled(cls)
    cls.SCALE = -2.0
    with pytest.raises(StaleGlobalsError, match=f"'SCALE' in class {cls.__name__}"):
        compiled(inputs[0])
    cls.SCALE = 1.0
    cls.SCORE_THRESHOLD = 0.3
    with pytest.raises(StaleGlobalsError, match=f"'SCORE_THRESHOLD' in class {cls.__name__}"):
        compiled(inputs[0])
    cls.SCORE_THRESHOLD = 0.0  # an equal value again: the compiled code is right once more
    assert _agree(model, compiled, inputs) == 2


def test_a_subclass_shadowing_a_base_constant_is_refused():
    _, compiled, inputs = _compiled(WideDetector)
    WideDetector.SCALE = 3.0  # set on the subclass: the base's value is unchanged
    with pytest.raises(StaleGlobalsError, match="'SCALE' in class WideDetector"):
        compiled(inputs[0])


def test_a_global_config_changed_in_place_is_refused_then_accepted_back():
    model, compiled, inputs = _compiled(ConfiguredDetector)
    CONFIG["scale"] = -2.0
    with pytest.raises(StaleGlobalsError, match=r"CONFIG \(changed in place\)"):
        compiled(inputs[0])
    CONFIG["scale"] = 1.0
    WEIGHTS.append(-1.0)
    with pytest.raises(StaleGlobalsError, match=r"WEIGHTS \(changed in place\)"):
        compiled(inputs[0])
    WEIGHTS.pop()
    assert _agree(model, compiled, inputs) == 2
