"""Code exported as one graph whose *structure* depends on a symbolic size: the
number of pieces of ``torch.split``/``unbind`` along the batch. The graph traced at
the example holds at no other batch size (ONNX Runtime failed on the first call with
another batch, before this check). dycl compiles such a model for the example's
size only, with a ``SpecialisationWarning`` naming the line (as ``torch.export``
reports a dim its guards specialise), and the host refuses other sizes by name. A
fixed number of pieces (``torch.chunk``) keeps the batch symbolic."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from dycl.hcfg.symbolic import SizeDependentStructure, SymbolicShapes, SymbolicTensor

import dycl
from dycl.harness.testing import assert_equivalent

pytestmark = pytest.mark.filterwarnings("ignore")


class PairPooling(nn.Module):
    """Pools consecutive pairs of rows, as someone writes it for a batch of frames."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.proj = nn.Linear(4, 4)

    def forward(self, frames):
        h = self.proj(frames)
        pairs = torch.split(h, 2, dim=0)
        pooled = torch.cat([pair.mean(0, keepdim=True) for pair in pairs])
        if pooled.mean() > 0:
            return pooled.relu()
        return pooled


class RowWeights(nn.Module):
    """Weights each row by its position, unbinding the batch."""

    def forward(self, x):
        rows = x.unbind(0)
        weighted = torch.stack([row * (i + 1) for i, row in enumerate(rows)])
        if weighted.sum() > 0:
            return weighted - 1
        return weighted


class HalfAndHalf(nn.Module):
    """Two halves whatever the batch: ``chunk`` into a fixed number of pieces."""

    def forward(self, x):
        first, second = torch.chunk(torch.tanh(x), 2, dim=0)
        difference = first.sum(0) - second.sum(0)
        if difference.sum() > 0:
            return difference * 2
        return difference


@pytest.mark.parametrize("model_type, line", [(PairPooling, "pairs = torch.split"), (RowWeights, "rows = x.unbind")])
def test_a_number_of_pieces_that_follows_the_batch_makes_it_static_with_a_warning(model_type, line):
    model = model_type().eval()
    with pytest.warns(dycl.SpecialisationWarning) as caught:
        compiled = dycl.compile(model, torch.randn(4, 4), progress=False)
    (warning,) = [w for w in caught if issubclass(w.category, dycl.SpecialisationWarning)]
    message = str(warning.message)
    assert "test_size_dependent_structure.py:" in message and line in message and "batch = 4 only" in message
    assert compiled.manifest.inputs[0].shape == (4, 4)
    inputs = [(torch.randn(4, 4, generator=torch.Generator().manual_seed(s)),) for s in range(8)]
    assert assert_equivalent(model, compiled, inputs, atol=1e-5) == 2
    with pytest.raises(ValueError, match="expected.*4.*got.*6|6.*expected.*4"):
        compiled(torch.randn(6, 4))


def test_a_fixed_number_of_pieces_keeps_the_batch_symbolic():
    model = HalfAndHalf().eval()
    compiled = dycl.compile(model, torch.randn(4, 3), progress=False)
    assert compiled.manifest.inputs[0].shape == ("batch", 3)
    inputs = [(torch.randn(b, 3, generator=torch.Generator().manual_seed(seed)),)
              for b in (4, 6, 8, 2) for seed in range(3)]
    assert assert_equivalent(model, compiled, inputs, atol=1e-5) == 2


@pytest.mark.parametrize("code, refused", [
    ("parts = torch.split(x, 2)", True),
    ("parts = x.unbind(0)", True),
    ("parts = torch.chunk(x, 2)", False),
    ("parts = x.split(3, dim=1)", False),  # along a static dim: the same pieces at every batch
])
def test_the_two_size_probe_tells_a_structure_that_follows_the_size(code, refused):
    shapes = SymbolicShapes()
    mirror = {"x": shapes.declare(torch.randn(4, 6), {0: "batch"}), "torch": torch}
    compiled = compile(code, "<test>", "exec")
    if refused:
        with pytest.raises(SizeDependentStructure):
            shapes.probe_tensor_code(compiled, mirror, {"x"}, {"parts"}, "sub")
        assert "parts" not in mirror
    else:
        assert shapes.probe_tensor_code(compiled, mirror, {"x"}, {"parts"}, "sub")
        assert all(isinstance(part, SymbolicTensor) for part in mirror["parts"])
