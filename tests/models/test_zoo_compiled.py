"""Paper Table 2 and Table 3 on the zoo: dycl on ONNX Runtime is consistent with
eager PyTorch on 100 inputs over many paths; the traced baseline is not."""

from __future__ import annotations

import importlib
import warnings

import pytest

import dycl
from dycl.harness import check
from models import GENERATORS, ZOO


@pytest.mark.parametrize("name", ZOO)
def test_zoo_model_is_consistent_and_the_traced_baseline_is_not(name):
    warnings.simplefilter("ignore")
    zoo = importlib.import_module(name)
    model, example = zoo.build()
    compiled = dycl.compile(model, example)
    inputs = [zoo.sample(seed) for seed in range(100)]
    report = check(model, compiled, inputs, postprocess=zoo.postprocess)
    assert report.eta == 0.0
    assert report.delta <= -4.0, report
    assert report.paths >= 3
    if name in GENERATORS:
        lengths = {len(zoo.postprocess(model(x))) for x in inputs}
        assert len(lengths) >= 3, lengths
    assert report.traced_eta is not None and report.traced_eta > 0.0
