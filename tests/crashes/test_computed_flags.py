"""A dataclass or NamedTuple output whose bool field the model computes from data
(``dycl.model.records``, ``dycl.model.library.object_output``): the flag is carried as a value on
every path, not compiled in as the example's, in process and through the torch-free host."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host


@dataclass
class Prediction:
    probs: torch.Tensor
    confident: bool
    calibrated: bool = True


class ConfidenceHead(nn.Module):
    """A classifier that says whether it is sure, and refines its answer when it is not."""

    def __init__(self, threshold: float = 0.6):
        super().__init__()
        self.body = nn.Linear(8, 4)
        self.refine = nn.Linear(4, 4)
        self.threshold = threshold

    def forward(self, x):
        probs = F.softmax(self.body(x), dim=-1)
        if probs.max() > self.threshold:
            return Prediction(probs, True)
        refined = F.softmax(self.refine(probs), dim=-1)
        return Prediction(refined, bool(refined.max() > 0.3), calibrated=False)


class Decision(NamedTuple):
    scores: torch.Tensor
    accept: bool


class Gate(nn.Module):
    """Accepts when the best score is high; otherwise rescores and decides again."""

    def __init__(self):
        super().__init__()
        self.score = nn.Linear(8, 4)

    def forward(self, x):
        scores = self.score(x).softmax(-1)
        if scores.max() > 0.6:
            return Decision(scores, True)
        return Decision(scores * 2, bool(scores.max() > 0.4))


def _inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    return [torch.randn(1, 8, generator=generator) * scale for scale in (0.1, 0.5, 1.0, 3.0, 8.0) for _ in range(8)]


def test_a_computed_flag_follows_the_data(tmp_path):
    model = ConfidenceHead().eval()
    inputs = _inputs()
    flags = {(out.confident, out.calibrated) for out in (model(x) for x in inputs)}
    assert len(flags) >= 2  # the flag itself takes several values
    assert assert_agrees_in_process_and_as_host(model, inputs, tmp_path, 1e-5) >= 2


def test_a_namedtuple_flag_follows_the_data(tmp_path):
    model = Gate().eval()
    inputs = _inputs()
    assert len({model(x).accept for x in inputs}) == 2
    assert assert_agrees_in_process_and_as_host(model, inputs, tmp_path, 1e-5) == 2
