"""The operators transformers 5's default experts compute with, which torch's ONNX exporter
(opset 17) cannot translate: ``torch.histc`` (tokens per expert) and ``F.grouped_mm``
(one matmul per expert's rows). dycl's translations (``dycl.backends.onnx_symbolics``)
against eager, in process and through the torch-free host, with a symbolic row count,
values on the range's edges and outside it, and experts that get no rows."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch


class CountThenGroup(nn.Module):
    """Rows sorted by expert, counted with ``histc``, multiplied with ``grouped_mm``; a
    crowded expert (more than half the rows) takes another path."""

    def __init__(self, experts: int = 4, dim: int = 8) -> None:
        super().__init__()
        self.experts = experts
        self.weight = nn.Parameter(torch.randn(experts, dim, dim) / dim ** 0.5)

    def forward(self, x, expert_ids):
        ids, order = torch.sort(expert_ids)
        counts = torch.histc(ids.float(), bins=self.experts, min=0, max=self.experts - 1)
        offsets = torch.cumsum(counts, dim=0, dtype=torch.int32)
        out = F.grouped_mm(x[order], self.weight, offs=offsets)
        if counts.max() > x.shape[0] / 2:
            out = out * 0.5
        return out, counts


class Histogram(nn.Module):
    def forward(self, x):
        return torch.histc(x, bins=5, min=-1.0, max=1.5)


def _routed(count: int, seed: int = 4) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    calls = []
    for i in range(count):
        rows = [1, 3, 6, 9, 12][i % 5]
        high = 1 + i % 4  # only the first experts: the others get no rows
        calls.append((torch.randn(rows, 8, generator=generator), torch.randint(0, high, (rows,), generator=generator)))
    return calls


def test_histc_and_grouped_mm_agree_with_eager_on_both_paths(tmp_path):
    torch.manual_seed(0)
    model = CountThenGroup().eval()
    compiled = dycl.compile(model, (torch.randn(6, 8), torch.tensor([0, 1, 1, 2, 3, 3])),
                            dynamic={"x": {0: "rows"}, "expert_ids": {0: "rows"}})
    calls = _routed(15)
    assert assert_equivalent(model, compiled, calls, min_paths=2, atol=1e-5) == 2
    report = run_host_without_torch(compiled.save(tmp_path / "moe_ops"), model, calls, atol=1e-5)
    assert report == {"checked": len(calls), "problems": [], "torch_loaded": False}


@pytest.mark.parametrize("values", [[-1.0, 1.5, 0.0, 0.25], [-2.0, 2.0, 1.4999, -0.999], [0.5] * 7])
def test_histc_counts_the_edges_as_eager_does_and_drops_what_is_outside(values):
    model = Histogram().eval()
    compiled = dycl.compile(model, torch.tensor([0.1, 0.7, -0.5]), dynamic={"x": {0: "n"}})
    x = torch.tensor(values)
    assert torch.equal(compiled(x), model(x))


def test_after_dycl_torchs_own_export_of_an_operator_it_cannot_translate_says_so():
    """dycl's translations exist only during its exports: afterwards, the user's own
    ``torch.onnx.export`` of ``histc`` fails with torch's "not supported" error, as it does
    in a process that never compiled with dycl (not inside torch's registry)."""
    import io

    from torch.onnx.errors import UnsupportedOperatorError

    compiled = dycl.compile(Histogram().eval(), torch.rand(12) * 2 - 1, dynamic=False)
    x = torch.rand(12) * 2 - 1
    assert torch.equal(compiled(x), Histogram()(x))
    with pytest.raises(UnsupportedOperatorError, match="aten::histc"):
        torch.onnx.export(Histogram(), (x,), io.BytesIO(), dynamo=False, opset_version=17)
