"""``index_put_(..., accumulate=True)`` sums repeated indices as eager does
(``dycl.backends.onnx_accumulate``): a confusion matrix counted from predictions (two
index tensors, int64, many repeats) and a label histogram (one index, float, negative
indices), in process and through the torch-free host; a boolean mask with accumulation,
which torch's translation would replace instead of add, is refused at the user's line."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch


class ConfusionMatrix(nn.Module):
    def __init__(self, classes: int = 3) -> None:
        super().__init__()
        self.classes = classes

    def forward(self, logits, labels):
        preds = logits.argmax(-1)
        matrix = torch.zeros(self.classes, self.classes, dtype=torch.long)
        matrix.index_put_((labels, preds), torch.ones_like(labels), accumulate=True)
        if (matrix * torch.eye(self.classes, dtype=torch.long)).sum() * 2 > labels.numel():
            return matrix, "mostly right"
        return matrix, "mostly wrong"


class LabelHistogram(nn.Module):
    def forward(self, weights, labels):  # labels in [-4, 3]: negative ones count from the end
        hist = torch.zeros(4)
        hist.index_put_((labels,), weights, accumulate=True)
        if hist.max() > 1.5:
            return hist / hist.sum()
        return hist


class MaskedAccumulate(nn.Module):
    def forward(self, x):
        y = torch.zeros_like(x)
        y.index_put_((x > 0,), torch.tensor(1.0), accumulate=True)
        return y


def _confusion_inputs() -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(70)
    out = []
    for i in range(50):
        labels = torch.randint(0, 3, (8,), generator=generator)
        logits = torch.randn(8, 3, generator=generator)
        logits[torch.arange(8), labels] += (i % 4) * 0.8  # some batches mostly right
        out.append((logits, labels))
    return out


def _histogram_inputs() -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(71)
    return [(torch.rand(6, generator=generator), torch.randint(-4, 4, (6,), generator=generator)) for _ in range(50)]


@pytest.mark.parametrize("model, inputs", [(ConfusionMatrix, _confusion_inputs), (LabelHistogram, _histogram_inputs)])
def test_repeated_indices_are_summed(model, inputs, tmp_path):
    model, inputs = model().eval(), inputs()
    compiled = dycl.compile(model, inputs[0])
    assert assert_equivalent(model, compiled, inputs, atol=1e-6) == 2
    report = run_host_without_torch(compiled.save(tmp_path / "art"), model, inputs, atol=1e-6)
    assert report["checked"] == len(inputs) and not report["problems"], report["problems"][:3]


def test_accumulating_through_a_boolean_mask_is_refused():
    with pytest.raises(dycl.UnsupportedError, match=r"index_put.*accumulate=True.*test_index_put_accumulate.py:\d+"):
        dycl.compile(MaskedAccumulate().eval(), torch.randn(2, 3))
