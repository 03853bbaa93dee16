"""A sum or product over a prefix whose length is read off the data (``onnx_empty_reductions``):
with no element (``k == 0``) eager gives the identity with the reduced dim gone (or kept as 1),
which ONNX Runtime alone does not. Compiled equals eager in process and as a torch-free host on
inputs with several ``k``, 0 included."""

from __future__ import annotations

import torch
from torch import nn

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
