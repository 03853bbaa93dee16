"""End to end: a model written for one image whose sub-DNNs reduce or mix the whole
tensor (standardising the image, ``max`` of a softmax, ``view(-1)``, ``cumsum`` of the
flattened features) next to row-wise bulk. The bulk, the whole-tensor reductions and
the flattening run batched over each group, the ``cumsum`` per sample, and every
sample still gets what eager gives it alone, in process and through the saved
torch-free host."""

from __future__ import annotations

import onnx
import pytest
import torch

import dycl
from dycl.per_sample.testing import assert_per_sample, batch_of, diverse, paths_of, saved_host_report
from tests.per_sample import nets

ATOL = 1e-5
pytestmark = pytest.mark.filterwarnings("ignore")


def _images(count: int, offset: int = 0) -> list[torch.Tensor]:
    return [torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(offset + s)) * (1 + s % 3)
            for s in range(count)]


@pytest.fixture(scope="module")
def standardised(tmp_path_factory):
    model = nets.StandardisedEarlyExitCNN().eval()
    model.calibrate(_images(64, offset=1000))
    images = _images(48)
    compiled = dycl.compile(model, images[0], per_sample=True, progress=False)
    return model, compiled, images, compiled.save(tmp_path_factory.mktemp("artifact") / "standardised")


def _forms(artifact) -> dict[str, int]:
    """How many sub-DNN files are batched whole, batched with a per-sample tail, or scanned whole."""
    forms = {"batched": 0, "tail": 0, "scanned": 0}
    for path in artifact.glob("*.onnx"):
        scans = [n.name for n in onnx.load(path, load_external_data=False).graph.node if n.op_type == "Scan"]
        forms["tail" if "per_sample_tail" in scans else "scanned" if scans else "batched"] += 1
    return forms


def test_a_batch_of_16_over_three_paths_equals_eager_per_sample(standardised):
    model, compiled, images, _ = standardised
    paths = paths_of(model, images)
    chosen = [images[i] for i in diverse(paths, 16)]
    assert assert_per_sample(model, compiled, chosen, min_paths=3, atol=ATOL) == 3
    exits = compiled(batch_of(chosen)[0])[1]
    assert sorted(set(exits)) == [1, 2, 3]


def test_the_bulk_is_batched_and_the_mixing_statements_are_not(standardised):
    *_, artifact = standardised
    forms = _forms(artifact)
    # the image's standardisation and both exits' max over the softmax reduce one sample's whole tensor,
    # row by row in the group (each row meets its own mean, std and max); the last stage's view(-1) is
    # each row's own too, and only its cumsum over the flattened features runs per sample
    assert forms == {"batched": 2, "tail": 1, "scanned": 0}


def test_the_saved_host_agrees_without_torch(standardised):
    model, _, images, artifact = standardised
    report = saved_host_report(artifact, model, images, images[5], atol=ATOL)
    assert report == {"checked": 2, "problems": [], "torch_loaded": False}
