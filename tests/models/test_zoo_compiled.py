"""Paper Table 2 and Table 3 on the zoo: dycl on ONNX Runtime is consistent with
eager PyTorch on 100 inputs over many paths (30 in the default run); the traced baseline is not."""

from __future__ import annotations

import warnings

import pytest

from dycl.harness import check
from models import GENERATORS, ZOO


# Every model is compiled and checked in the default run, on its first 30 inputs (3 to 30 paths
# each, 5 to 13 output lengths for the generators); the paper's 100 inputs with `make test-slow`
# (about two thirds of this test's time is the consistency check, not the compile).
@pytest.mark.parametrize("count", [30, pytest.param(100, marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", ZOO)
def test_zoo_model_is_consistent_and_the_traced_baseline_is_not(name, count, compiled_zoo):
    warnings.simplefilter("ignore")
    zoo, model, _, compiled = compiled_zoo(name)  # check() changes neither: shared with the other tests
    inputs = [zoo.sample(seed) for seed in range(count)]
    report = check(model, compiled, inputs, postprocess=zoo.postprocess)
    assert report.eta == 0.0
    assert report.delta <= -4.0, report
    assert report.paths >= 3
    if name in GENERATORS:
        lengths = {len(zoo.postprocess(model(x))) for x in inputs}
        assert len(lengths) >= 3, lengths
    assert report.traced_eta is not None and report.traced_eta > 0.0
