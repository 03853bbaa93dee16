"""A sum or product over a prefix whose length is read off the data (``onnx_empty_reductions``):
with no element (``k == 0``) eager gives the identity with the reduced dim gone (or kept as 1),
which ONNX Runtime alone does not. Compiled equals eager in process and as a torch-free host on
inputs with several ``k``, 0 included."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import dycl
from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host


class Prefix(nn.Module):
    """Pooled scores over the first ``k`` features, ``k`` the count of confident ones."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 8)

    def forward(self, x):
        h = self.proj(x)
        k = int((h > 1).sum())
        head = h[:, :k]
        return head.sum(-1), head.sum(dim=1, keepdim=True) * 2, (head.tanh() + 1).prod(-1), torch.sum(head, 1)


def test_sum_and_prod_over_an_empty_prefix_are_eagers(tmp_path):
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(2)
    model = Prefix().eval()
    inputs = [torch.zeros(1, 4)] + [torch.randn(1, 4, generator=generator) * (i % 4) for i in range(16)]
    assert_agrees_in_process_and_as_host(model, inputs, tmp_path, 1e-5)
    with torch.no_grad():
        lengths = {int((model.proj(x) > 1).sum()) for x in inputs}
    assert 0 in lengths and len(lengths) >= 3, lengths


class PrefixPeak(nn.Module):
    """The largest of the first ``k`` scores, ``k`` at least 1 on some inputs and 0 on others."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 8)

    def forward(self, x):
        h = self.proj(x)
        k = int((h > 1).sum())
        return h[:, :k].amax(-1) + h[:, :k].amin(dim=1, keepdim=True).sum()


def test_amax_over_a_nonempty_prefix_is_eagers_and_an_empty_one_raises(tmp_path):
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(5)
    model = PrefixPeak().eval()
    inputs = [torch.randn(1, 4, generator=generator) * 3 for _ in range(40)]
    with torch.no_grad():
        lengths = [int((model.proj(x) > 1).sum()) for x in inputs]
    full = [x for x, k in zip(inputs, lengths) if k > 0]
    assert len({k for k in lengths if k > 0}) >= 2
    assert_agrees_in_process_and_as_host(model, full, tmp_path, 1e-5)
    empty = next(x for x, k in zip(inputs, lengths) if k == 0)
    compiled = dycl.compile(model, full[0], progress=False)
    with pytest.raises(Exception):  # noqa: B017 - eager raises IndexError; the compiled model an ORT error
        compiled(empty)
    with pytest.raises(IndexError):
        model(empty)
