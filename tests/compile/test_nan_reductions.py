"""``max``/``min``/``amax``/``amin``/``argmax``/``argmin``, sorting, ``sign`` and max pooling treat NaN
(and pool a window of ``-inf`` to ``-inf``) as eager does (``dycl.backends.onnx_nan_reductions``):
each form on inputs with NaN in several positions (first, last, twice, beside inf, none)
and padded sequences masked with ``-inf``, in process and through the torch-free host;
afterwards torch's own export of ``max`` is torch's again."""

from __future__ import annotations

import io

import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

import dycl
from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch

NAN, INF = float("nan"), float("inf")


class EveryReduction(nn.Module):
    def forward(self, x):
        values, indices = x.max(1)
        low, low_at = torch.min(x, dim=0, keepdim=True)
        out = (x.max(), x.min(), values, indices, low, low_at, x.amax((0, 1)), x.amin(-1),
               x.argmax(), x.argmin(1, keepdim=True), torch.max(x, x.flip(1)), x.sign())
        if torch.isnan(values).any():
            return out
        return out[:4]


def _inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(60)
    spots = [[], [(0, 0)], [(1, 3)], [(0, 2), (2, 2)], [(2, 0), (2, 1)]]
    out = []
    for i in range(50):
        x = torch.randn(3, 4, generator=generator)
        for row, col in spots[i % len(spots)]:
            x[row, col] = NAN
        if i % 3 == 0:
            x[1, 1] = INF if i % 2 else -INF
        out.append(x)
    return out


def test_reductions_propagate_nan_in_process_and_on_the_host(tmp_path):
    model = EveryReduction().eval()
    inputs = _inputs()
    assert assert_agrees_in_process_and_as_host(model, inputs, tmp_path, 1e-6) == 2


class MaskedPooling(nn.Module):  # padded positions masked with -inf, then pooled and cleaned up
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(2, 3, 3, padding=1)
        self.pool2d = nn.MaxPool2d(3, stride=2, padding=1, return_indices=True)

    def forward(self, x, lengths):  # x: (B, 2, L); lengths: (B,)
        mask = torch.arange(x.size(-1)).unsqueeze(0) < lengths.unsqueeze(1)
        h = self.conv(x).masked_fill(~mask.unsqueeze(1), float("-inf"))
        pooled = F.max_pool1d(h, 2, ceil_mode=True)
        grid, where = self.pool2d(x.unsqueeze(1))  # where: a window holding NaN is not covered
        if torch.isinf(pooled).any():
            return torch.where(torch.isinf(pooled), torch.zeros_like(pooled), pooled), grid, where.shape[-1]
        return pooled, grid, where.shape[-1]


def _pooling_inputs() -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(61)
    out = []
    for i in range(50):
        x = torch.randn(2, 2, 7, generator=generator)
        if i % 4 == 1:
            x[0, 1, 3] = NAN
        out.append((x, torch.tensor([7, 1 + i % 7])))
    return out


def test_max_pooling_propagates_nan_and_minus_inf(tmp_path):
    model = MaskedPooling().eval()
    inputs = _pooling_inputs()
    assert assert_agrees_in_process_and_as_host(model, inputs, tmp_path, 1e-6) == 2


class RankedScores(nn.Module):  # ranking with NaN scores (a failed metric) beside inf and ties
    def forward(self, scores):
        ordered, order = scores.sort(-1)
        top_values, top_indices = scores[:2].topk(2, dim=-1)  # row 2's ties: torch's topk orders them its own way
        bottom_values, bottom_indices = torch.topk(scores[:2], 2, largest=False)
        ranks = scores.argsort(dim=-1, descending=True)
        if torch.isnan(ordered[:, -1]).any():
            return ordered, order, top_values, top_indices, bottom_values, ranks
        return ordered, order, bottom_indices, ranks


def test_sorting_puts_nan_above_inf(tmp_path):
    model = RankedScores().eval()
    inputs = _inputs()
    for x in inputs[::4]:
        x[2] = torch.tensor([1.0, 1.0, INF, 0.5])  # ties and inf, no NaN
    assert assert_agrees_in_process_and_as_host(model, inputs, tmp_path, 1e-6) == 2


def test_after_dycl_torchs_own_export_of_max_is_torchs():
    model = EveryReduction().eval()
    dycl.compile(model, _inputs()[0])
    buffer = io.BytesIO()
    torch.onnx.export(model, (torch.randn(3, 4),), buffer, dynamo=False, opset_version=17)
    kinds = {node.op_type for node in onnx.load_from_string(buffer.getvalue()).graph.node}
    assert "ReduceMax" in kinds and "IsNaN" not in kinds


class GatedVGGStage(nn.Module):  # conv-relu-pool twice, a mixed-pool head and a softmax confidence
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 4, 3, padding=1), nn.Conv2d(4, 4, 3, padding=1)
        self.head = nn.Linear(4 * 2 * 2, 5)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)  # relu feeds the pool: no -inf (the cheap NaN repair)
        h = F.max_pool2d(F.relu(self.conv2(h)), 2, ceil_mode=True)
        head = F.max_pool2d(h, 2)  # fed by the first repair's sum: still no -inf
        logits = self.head(torch.flatten(head, 1))
        probabilities = F.softmax(logits, dim=1)
        confidence = torch.max(probabilities)  # a batch of rows: NaN in one row must reach the test
        best, label = probabilities.max(1)  # rows along the softmax's axis: ORT's own reduction agrees
        if confidence >= 0.3:
            return logits, best, label
        return -logits, best, label


def _stage_inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(62)
    out = []
    for i in range(48):
        x = torch.randn(3, 1, 16, 16, generator=generator) * (1 + i % 5)
        if i % 4 == 1:
            x[i % 3, 0, i % 16, 2] = NAN
        if i % 6 == 2:
            x[(i + 1) % 3, 0, 4, i % 16] = INF
        out.append(x)
    return out


def test_nan_repairs_by_average_and_by_sum_agree_with_eager(tmp_path):
    model = GatedVGGStage().eval()
    inputs = _stage_inputs()
    compiled = dycl.compile(model, inputs[0])
    with torch.no_grad():
        assert sum(bool(torch.isnan(model(x)[0]).any()) for x in inputs) >= 8  # NaN reaches the outputs
    assert assert_equivalent(model, compiled, inputs, atol=1e-5) == 2
    report = run_host_without_torch(compiled.save(tmp_path / "art"), model, inputs, atol=1e-5)
    assert report["checked"] == len(inputs) and not report["problems"], report["problems"][:3]
    graph = onnx.load_from_string(next(data for name, data in compiled._result.files.items()
                                       if name.endswith(".onnx")))
    kinds = [node.op_type for node in graph.graph.node]
    assert "IsInf" not in kinds and kinds.count("Tanh") == 3  # every pool repaired by its average
