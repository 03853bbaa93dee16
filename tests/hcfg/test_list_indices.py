"""A Python list of ints made from the data indexing a tensor (``h[keep]``) is refused at the
user's line with the fix; the fix the hint names (a boolean mask) compiles and agrees with
eager on inputs that keep different numbers of rows, in process and in the torch-free host."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import dycl
from dycl.harness.testing_host import run_host_without_torch

pytestmark = pytest.mark.filterwarnings("ignore")


class KeepPositive(nn.Module):
    """Keep the rows whose first feature is positive (a list comprehension over the data)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 3)
        self.out = nn.Linear(3, 2)

    def forward(self, x):
        h = self.proj(x)
        keep = [i for i, v in enumerate(h[:, 0].tolist()) if v > 0]
        h = h[keep] if keep else h
        return self.out(h)


class KeepPositiveMask(KeepPositive):
    """The same with a boolean mask (the refusal's hint)."""

    def forward(self, x):
        h = self.proj(x)
        keep = h[:, 0] > 0
        if keep.any():
            h = h[keep]
        return self.out(h)


def _inputs(count: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(11)
    return [torch.randn(5, 4, generator=g) * (1 + i % 3) for i in range(count)]


def _model(cls: type[nn.Module]) -> nn.Module:
    torch.manual_seed(5)
    return cls().eval()


def test_a_list_of_ints_as_an_index_is_refused_at_the_users_line():
    with pytest.raises(dycl.UnsupportedError) as refused:
        dycl.compile(_model(KeepPositive), _inputs(1)[0], progress=False)
    message = str(refused.value)
    assert "list of ints" in message and "'keep'" in message
    assert f"{__file__.rsplit('/', 1)[-1]}:" in message and "boolean mask" in message


def test_the_hinted_tensor_index_agrees_with_eager(tmp_path):
    model, inputs = _model(KeepPositiveMask), _inputs(24)
    compiled = dycl.compile(model, inputs[0], progress=False)
    with torch.no_grad():
        kept = {int((model.proj(x)[:, 0] > 0).sum()) for x in inputs}
        for x in inputs:
            assert torch.allclose(compiled(x), model(x), atol=1e-5)
    assert len(kept) >= 3 and 0 in kept  # several widths, and both paths (some keep no row)
    report = run_host_without_torch(compiled.save(tmp_path / "keep"), model, inputs[:12], atol=1e-5)
    assert report == {"checked": 12, "problems": [], "torch_loaded": False}
