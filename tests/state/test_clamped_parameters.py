"""A parameter clamped in place inside forward() (CLIP's ``self.logit_scale.data.clamp_(0, 4.6052)``,
``with torch.no_grad(): self.temperature.clamp_(min=...)``) compiles as module state: the clamped
value is written back to the user's parameter after each call, as eager does, and the saved host
keeps it between calls. Started in range the clamp changes nothing; started out of range it changes
the parameter on the first call only -- both are checked over calls in sequence."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dycl
from dycl.harness.paths import model_source_files, record_path
from dycl.harness.testing import outputs_match
from dycl.harness.testing_host import run_host_without_torch

ATOL = 1e-4  # logits reach 100 (exp(4.6052)): float32 rounding there is ~1e-5


class ContrastiveHead(nn.Module):
    """CLIP's head: projections, a learned temperature clamped through ``.data``, the symmetric loss;
    a batch whose matching pairs score below the mean is weighted up."""

    def __init__(self, logit_scale: float, dim: int = 8, embed: int = 6):
        super().__init__()
        self.visual_projection = nn.Linear(dim, embed, bias=False)
        self.text_projection = nn.Linear(dim, embed, bias=False)
        self.logit_scale = nn.Parameter(torch.tensor(logit_scale))

    def forward(self, image_features, text_features):
        self.logit_scale.data.clamp_(0, 4.6052)
        image_embeds = F.normalize(self.visual_projection(image_features), dim=-1)
        text_embeds = F.normalize(self.text_projection(text_features), dim=-1)
        logits_per_image = self.logit_scale.exp() * image_embeds @ text_embeds.t()
        labels = torch.arange(logits_per_image.shape[0])
        loss = (F.cross_entropy(logits_per_image, labels) + F.cross_entropy(logits_per_image.t(), labels)) / 2
        if logits_per_image.diagonal().mean() < logits_per_image.mean():
            loss = loss * 2
        return loss, logits_per_image


class TemperatureScaledLogits(nn.Module):
    """A calibration head (SimCLR/MoCo style): the temperature kept above a floor under no_grad."""

    def __init__(self, temperature: float, dim: int = 8):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.temperature = nn.Parameter(torch.tensor(temperature))

    def forward(self, queries, keys):
        with torch.no_grad():
            self.temperature.clamp_(min=0.05)
        logits = F.normalize(self.fc(queries), dim=-1) @ F.normalize(keys, dim=-1).t() / self.temperature
        if logits.max() > 10:
            return logits.log_softmax(-1)
        return logits


class DataClampMin(nn.Module):
    """``self.temperature.data.clamp_(min=...)``, the temperature read in both branches."""

    def __init__(self, temperature: float, dim: int = 8):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.temperature = nn.Parameter(torch.tensor(temperature))

    def forward(self, queries, keys):
        self.temperature.data.clamp_(min=0.05)
        scores = F.normalize(self.fc(queries), dim=-1) @ F.normalize(keys, dim=-1).t()
        if scores.mean() > 0:
            return scores / self.temperature
        return scores * self.temperature


def _pairs(seed: int, count: int = 10) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    pairs = []
    for i in range(count):
        image = torch.randn(4, 8, generator=generator)
        text = image + torch.randn(4, 8, generator=generator) * (0.1 if i % 2 else 3.0)  # matched or not
        pairs.append((image * (i + 1), text))
    return pairs


def _same_parameters(expected: nn.Module, actual: nn.Module, where: str) -> None:
    for (name, want), got in zip(expected.named_parameters(), actual.parameters()):
        assert torch.allclose(want, got, atol=ATOL), f"{where}: {name} differs ({want} vs {got})"


def _run_sequence(model: nn.Module, twin: nn.Module, compiled, inputs: list) -> int:
    files, paths = model_source_files(twin), set()
    for step, (a, b) in enumerate(inputs):
        with torch.no_grad():
            expected, path = record_path(twin, a, b, files=files)
        paths.add(path)
        problem = outputs_match(expected, compiled(a, b), ATOL)
        assert problem is None, f"call #{step}: {problem}"
        _same_parameters(twin, model, f"after call #{step}")
    return len(paths)


CASES = [(ContrastiveHead, math.log(1 / 0.07)), (ContrastiveHead, 6.0),
         (TemperatureScaledLogits, 0.07), (TemperatureScaledLogits, -0.5),
         (DataClampMin, 0.5), (DataClampMin, 0.01)]
IDS = ["clip-in-range", "clip-above", "no-grad-in-range", "no-grad-below", "data-min-in-range", "data-min-below"]


@pytest.mark.parametrize("model_class, start", CASES, ids=IDS)
def test_clamped_parameter_matches_eager_over_calls(model_class, start, tmp_path):
    torch.manual_seed(0)
    model = model_class(start).eval()
    twin, initial = copy.deepcopy(model), copy.deepcopy(model)
    inputs = _pairs(7)
    compiled = dycl.compile(model, inputs[0])
    _same_parameters(initial, model, "after compiling")  # compiling clamps nothing
    assert _run_sequence(model, twin, compiled, inputs) == 2  # weighted up or not / the two branches
    # the user moves the parameter out of range again (an optimizer step): the next call clamps it
    for module in (model, twin):
        next(p for name, p in module.named_parameters() if "fc" not in name and "proj" not in name).data.fill_(-3.0)
    assert _run_sequence(model, twin, compiled, inputs[:4]) == 2
    # the saved host starts from the parameter as compiled and keeps the clamped value between calls
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), initial, inputs, ATOL)
    assert report["checked"] == len(inputs) and not report["problems"], report["problems"][:3]


class RebindsData(nn.Module):
    """``self.running.data = ...`` swaps the buffer's storage: refused, not threaded."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.register_buffer("running", torch.zeros(8))

    def forward(self, x):
        self.running.data = x.mean(0)  # MARK
        if x.sum() > 0:
            return self.fc(x) + self.running
        return x - self.running


class WritesDataItem(RebindsData):
    def forward(self, x):
        self.running.data[0] = x.sum()  # MARK
        return self.fc(x) + self.running


@pytest.mark.parametrize("model_class", [RebindsData, WritesDataItem])
def test_assignment_through_data_is_refused_at_its_line(model_class):
    model = model_class().eval()
    before = copy.deepcopy(model.state_dict())
    with pytest.raises(dycl.UnsupportedError, match=r"assignment to \.data .* at .*\.py:\d+\n.*# MARK"):
        dycl.compile(model, torch.randn(2, 8))
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
