"""A tensor test joined by ``and``/``or`` to an operand the example fixes (a mode string, a
config flag): only the tensor's truth decides, so the condition is the tensor test alone
(``x and <true>`` asked ``bool()`` of a tensor inside a graph and was refused, while the same
test written the other way round compiled). Golden snippet of the folded tests, and
equivalence in process and through the torch-free host."""

from __future__ import annotations

import torch
from torch import nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch
from tests.rewriter.golden import after, golden


class Pooled(nn.Module):
    def __init__(self, enabled: bool = True, strict: bool = False) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.enabled, self.strict = enabled, strict

    def forward(self, x, mode="sum"):
        h = self.lin(x)
        if h.mean() > 1 and mode == "sum":
            return h.sum(-1)
        if not (h.max() > 1 or self.strict):
            h = h - 1
        scale = 0.5 if h.min() < -1 and self.enabled else 1.5
        return h.sum(-1) * scale


def test_the_fixed_operands_are_folded_out_of_the_tests():
    assert after(Pooled().eval(), "constprop") == golden("""
        h = self.lin(x)
        if h.mean() > 1:
            return h.sum(-1)
        if not h.max() > 1:
            h = h - 1
        if h.min() < -1:
            choice = 0.5
        else:
            choice = 1.5
        scale = choice
        if scale == 0.5:
            return h.sum(-1) * 0.5
        else:
            if scale == 1.5:
                return h.sum(-1) * 1.5
            else:
                raise RuntimeError("a value chosen by data that dycl did not compile this statement for")
    """)



def test_tensor_tests_with_fixed_operands_agree_on_every_path(tmp_path):
    torch.manual_seed(0)
    model = Pooled().eval()
    generator = torch.Generator().manual_seed(5)
    inputs = [torch.randn(batch, 4, generator=generator) * spread for batch in (1, 3) for spread in (0.1, 1.0, 4.0)]
    compiled = dycl.compile(model, inputs[0])
    paths = assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5)
    assert paths >= 2
    report = run_host_without_torch(compiled.save(tmp_path / "operands"), model, inputs, atol=1e-5)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}
