"""A model that only runs at batch 1 keeps its batch static, with a message (issue 31, point 2)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn as nn

import dycl
from dycl.model.example_run import batch_failure


class OneSample(nn.Module):
    """Written for one sample: ``.item()`` of a per-sample decision."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.gate = nn.Linear(4, 1)

    def forward(self, x):
        if (self.gate(x) > 0).int().item() == 0:
            return self.fc(x)
        return -self.fc(x)


class AnyBatch(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        if y.sum() > 0:
            return y
        return -y


def test_batch_failure_names_the_failure_at_a_larger_batch_only():
    torch.manual_seed(0)
    assert batch_failure(AnyBatch().eval(), (torch.randn(1, 4),)) is None
    found = batch_failure(OneSample().eval(), (torch.randn(1, 4),))
    assert found.startswith("RuntimeError at test_batch_check.py:") and "cannot be converted to Scalar" in found
    assert batch_failure(OneSample().eval(), (torch.randn(1, 5),)) is None  # fails on the example itself


def test_a_batch_one_model_compiles_static_with_a_warning_in_process_and_saved(tmp_path):
    torch.manual_seed(0)
    model = OneSample().eval()
    with pytest.warns(dycl.SpecialisationWarning, match="fails at batch 2.*per_sample=True.*dynamic=False"):
        compiled = dycl.compile(model, torch.randn(1, 4))
    assert compiled.manifest["inputs"][0]["shape"] == [1, 4]
    x = torch.randn(1, 4)
    torch.testing.assert_close(compiled(x), model(x))
    with pytest.raises(ValueError, match=r"expected shape \[1, 4\], got \[2, 4\]"):
        compiled(torch.randn(2, 4))
    loaded = dycl.load(compiled.save(tmp_path / "one"))
    with pytest.raises(ValueError, match=r"expected shape \[1, 4\], got \[2, 4\]"):
        loaded.run_numpy(np.ones((2, 4), np.float32))


def test_a_model_that_takes_any_batch_keeps_it_symbolic_and_dynamic_false_is_not_warned():
    with warnings.catch_warnings():
        warnings.simplefilter("error", dycl.SpecialisationWarning)
        compiled = dycl.compile(AnyBatch().eval(), torch.randn(1, 4))
        assert compiled.manifest["inputs"][0]["shape"] == ["batch", 4]
        static = dycl.compile(OneSample().eval(), torch.randn(1, 4), dynamic=False)
    assert static.manifest["inputs"][0]["shape"] == [1, 4]


def test_the_manifest_gives_output_shapes_with_symbolic_dims_by_name(tmp_path):
    compiled = dycl.compile(AnyBatch().eval(), torch.randn(1, 4))
    [output] = compiled.manifest["outputs"]
    assert output["shape"] == ["batch", 4] and output["example_shape"] == [1, 4]
    readme = (compiled.save(tmp_path / "any") / "README.md").read_text()
    assert "| `output` | float32 | [batch, 4] |" in readme
    static = dycl.compile(OneSample().eval(), torch.randn(1, 4), dynamic=False)
    assert "shape" not in static.manifest["outputs"][0]  # nothing symbolic: the example's shape says it all
