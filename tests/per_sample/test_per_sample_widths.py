"""A width read off the data (``k = int(h.argmax())``, then ``h[:, :k]``): the sub-DNNs after the
split take the width as a fresh symbol, not the example's width. Whole-call compiles agree with
eager at every width, in process and in the torch-free host. With ``per_sample=True`` samples of
different widths cannot share a group run (its outputs would need one width): the router groups the
requests of a sub-DNN whose outputs may be sized by the numbers passed by those numbers too
(``SIZED_BY_VALUES``), so a batch mixing widths and paths agrees with eager run sample by sample."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import dycl
from dycl.harness.paths import model_source_files, record_path
from dycl.harness.testing_host import run_host_without_torch
from dycl.per_sample.testing import assert_per_sample, diverse, paths_of, saved_host_report

pytestmark = pytest.mark.filterwarnings("ignore")
ATOL = 1e-5


class SplitAtPeak(nn.Module):
    """Split the features where the strongest one is, and weigh the heavier half."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 8)

    def forward(self, x):
        h = torch.relu(self.proj(x))
        k = int(h.argmax())
        left, right = h[:, :k], h[:, k:]
        if left.sum() > right.sum():
            return torch.cat([left.sum(1, keepdim=True) * 0.5, right.sum(1, keepdim=True)], dim=1)
        return torch.cat([left.sum(1, keepdim=True), right.mean(1, keepdim=True).nan_to_num()], dim=1)


def _samples(count: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(11)
    return [torch.randn(1, 4, generator=g) * (1 + i % 4) + (i % 3 - 1) for i in range(count)]


def _widths(model: nn.Module, samples: list[torch.Tensor]) -> set[int]:
    with torch.no_grad():
        return {int(torch.relu(model.proj(x)).argmax()) for x in samples}


def _model() -> SplitAtPeak:
    torch.manual_seed(5)
    return SplitAtPeak().eval()


def test_whole_call_agrees_with_eager_at_every_width(tmp_path):
    model, samples = _model(), _samples(48)
    compiled = dycl.compile(model, samples[0], progress=False)
    files = model_source_files(model)
    with torch.no_grad():
        paths = {record_path(model, x, files=files)[1] for x in samples}
        for x in samples:
            assert torch.allclose(compiled(x), model(x), atol=ATOL, equal_nan=True)
    assert len(paths) >= 2
    assert len(_widths(model, samples)) >= 3
    report = run_host_without_torch(compiled.save(tmp_path / "split"), model, samples[:16], atol=ATOL)
    assert report == {"checked": 16, "problems": [], "torch_loaded": False}


def test_per_sample_batches_mixing_widths_group_by_width(tmp_path):
    model, samples = _model(), _samples(48)
    compiled = dycl.compile(model, samples[0], per_sample=True, progress=False)
    chosen = [samples[i] for i in diverse(paths_of(model, samples), 16)]
    widths = _widths(model, chosen)
    assert len(widths) >= 3
    assert assert_per_sample(model, compiled, chosen, min_paths=2, atol=ATOL) == 2
    # the sub-DNN that slices at k runs once per width in the batch, no more
    sized = type(compiled._host).route.__globals__["SIZED_BY_VALUES"]
    _, groups = compiled._host.route(torch.cat(chosen).numpy())
    assert len(sized) == 1 and sum(index in sized for index, _ in groups) == len(widths)
    report = saved_host_report(compiled.save(tmp_path / "per_sample"), model, samples, samples[1], atol=ATOL)
    assert report == {"checked": 2, "problems": [], "torch_loaded": False}
