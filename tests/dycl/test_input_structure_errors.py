"""A call whose dict or list argument has another structure than the example's is refused with the
host's own ``ValueError`` (``hostgen.manifest.PortStructureError``) naming what was compiled and what was given, and
the model's line — not a ``RuntimeError`` that blames the compiled code. The model still answers as
eager on calls of the compiled structure, on both of its paths."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import dycl


class BatchHead(nn.Module):
    """A head fed a batch dict, as data loaders hand it over (``batch["x"]``, ``batch["bias"]``)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        hidden = self.proj(batch["x"])
        if hidden.mean() > 0:
            return hidden * 2
        return hidden - batch["bias"]


def _batch(seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(2, 4, generator=generator) + (1.5 if seed % 2 else -1.5),
            "bias": torch.randn(2, 4, generator=generator)}


@pytest.fixture(scope="module")
def compiled() -> tuple[nn.Module, dycl.CompiledModel]:
    torch.manual_seed(0)
    model = BatchHead().eval()
    return model, dycl.compile(model, (_batch(0),))


def test_calls_of_the_compiled_structure_agree_with_eager_on_both_paths(compiled) -> None:
    model, fast = compiled
    paths = set()
    for seed in range(8):
        batch = _batch(seed)
        paths.add(bool(model.proj(batch["x"]).mean() > 0))
        torch.testing.assert_close(fast(batch), model(batch), rtol=1e-5, atol=1e-5)
    assert len(paths) == 2


@pytest.mark.parametrize(("reshaped", "message"), [
    (lambda batch: {**batch, "extra": torch.ones(1)},
     r"a dict with keys \['bias', 'extra', 'x'\] where the model was compiled for a dict with keys \['bias', 'x'\]"),
    (lambda batch: {"x": batch["x"]},
     r"a dict with keys \['x'\] where the model was compiled for a dict with keys \['bias', 'x'\]"),
    (lambda batch: [batch["x"], batch["bias"]],
     r"a list where the model was compiled for a dict with keys \['bias', 'x'\]"),
], ids=["extra key", "missing key", "list"])
def test_another_structure_is_refused_naming_both_and_the_line(compiled, reshaped, message) -> None:
    _, fast = compiled
    with pytest.raises(ValueError, match=message) as refused:
        fast(reshaped(_batch(1)))
    assert type(refused.value).__name__ == "PortStructureError"  # the host's own copy of hostgen.manifest's class
    assert any("test_input_structure_errors.py:" in note for note in getattr(refused.value, "__notes__", []))
