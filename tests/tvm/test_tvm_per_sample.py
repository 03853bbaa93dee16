"""``per_sample=True`` on the TVM backend: each sub-DNN's group model (the single-sample
graph widened row by row, ``dycl.per_sample.group_onnx``) built by TVM; a batch of samples
over several paths equals eager run on each sample alone, in process and through the
saved torch-free host. A sub-DNN with a statement that must run sample by sample
(a ``Scan``, which TVM's ONNX importer lacks) is refused by name."""

from __future__ import annotations

import importlib
import warnings

import pytest
import torch

import dycl
from dycl.harness.testing_host import run_host_without_torch
from dycl.per_sample.testing import PerSampleEager, assert_per_sample, batch_of, diverse, paths_of
from tests.per_sample import nets

ATOL = 1e-4
pytestmark = pytest.mark.filterwarnings("ignore")


def test_a_batch_over_many_paths_equals_eager_per_sample_in_process_and_saved(tmp_path):
    model = nets.NormalisedPolicyNet().eval()
    samples = [torch.randn(1, 12, generator=torch.Generator().manual_seed(seed)) for seed in range(96)]
    compiled = dycl.compile(model, samples[0], per_sample=True, backend="tvm", progress=False)
    assert compiled.manifest.backend == "tvm" and compiled.manifest.per_sample
    paths = paths_of(model, samples)
    chosen = [samples[i] for i in diverse(paths, 16)]
    assert assert_per_sample(model, compiled, chosen, min_paths=6, atol=ATOL) >= 6
    assert assert_per_sample(model, compiled, samples[:1], atol=ATOL) == 1
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), PerSampleEager(model),
                                    [batch_of(chosen)[0], samples[7]], atol=ATOL)
    assert report == {"checked": 2, "problems": [], "torch_loaded": False}


@pytest.mark.slow  # ~40 s: the zoo model's calibration and seven TVM builds
def test_a_zoo_model_with_exits_equals_eager_per_sample():
    warnings.simplefilter("ignore")
    zoo = importlib.import_module("models.sdn_mobilenet")
    model, example = zoo.build()
    compiled = dycl.compile(model, example, per_sample=True, backend="tvm", progress=False)
    samples = [zoo.sample(seed) for seed in range(64)]
    chosen = [samples[i] for i in diverse(paths_of(model, samples), 16)]
    assert assert_per_sample(model, compiled, chosen, min_paths=3, atol=ATOL) >= 3


def test_a_statement_that_runs_sample_by_sample_is_refused_by_name():
    model = nets.StandardisedEarlyExitCNN().eval()
    with pytest.raises(dycl.UnsupportedError, match="no Scan") as caught:
        dycl.compile(model, torch.randn(1, 3, 16, 16), per_sample=True, backend="tvm", progress=False)
    assert "CumSum" in str(caught.value) and "backend='onnxruntime'" in str(caught.value)
