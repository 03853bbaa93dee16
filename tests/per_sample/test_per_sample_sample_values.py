"""End to end: single-sample idioms whose values have no row dim — ``x / x.norm()``,
``probs[0][i] > 0.5``, ``fc(x.view(-1))``, ``logits.max() > t`` — all run batched
(no per-sample ``Scan`` in any sub-DNN), and each sample of a batch over several
paths gets what eager gives it alone, in process and through the saved host."""

from __future__ import annotations

import onnx
import pytest
import torch
from dycl.hcfg.levers import Levers

import dycl
from dycl.per_sample.testing import assert_per_sample, diverse, paths_of, saved_host_report
from tests.per_sample import nets

ATOL = 1e-5
pytestmark = pytest.mark.filterwarnings("ignore")


def _samples(count: int) -> list[torch.Tensor]:
    return [torch.randn(1, 12, generator=torch.Generator().manual_seed(seed)) for seed in range(count)]


@pytest.fixture(scope="module")
def policy_net(tmp_path_factory):
    model = nets.NormalisedPolicyNet().eval()
    samples = _samples(96)
    compiled = dycl.compile(model, samples[0], per_sample=True, progress=False)
    return model, compiled, samples, compiled.save(tmp_path_factory.mktemp("artifact") / "policy")


def test_no_sub_dnn_runs_per_sample(policy_net, tmp_path):
    model, compiled, samples, artifact = policy_net
    # the gates and the exit are if-converted into one sub-DNN (dycl.per_sample.rejoin); routed, five
    routed = dycl.compile(model, samples[0], per_sample=True, progress=False, optimize=Levers(predicate=False))
    assert compiled.stats["per_sample"] == {"predicated_conditions": 4, "routed_conditions": 0}
    for artifact_, count in [(artifact, 1), (routed.save(tmp_path / "routed"), 5)]:
        files = list(artifact_.glob("*.onnx"))
        assert len(files) >= count
        for path in files:
            nodes = onnx.load(path, load_external_data=False).graph.node
            assert [n.op_type for n in nodes if n.op_type == "Scan"] == []
    assert assert_per_sample(model, routed, samples[:16], min_paths=3, atol=ATOL) >= 3


def test_a_batch_of_16_over_many_paths_equals_eager_per_sample(policy_net):
    model, compiled, samples, _ = policy_net
    paths = paths_of(model, samples)
    assert len(set(paths)) >= 6
    chosen = [samples[i] for i in diverse(paths, 16)]
    assert assert_per_sample(model, compiled, chosen, min_paths=6, atol=ATOL) >= 6
    one_path = [s for s, p in zip(samples, paths) if p == paths[0]][:8]
    assert assert_per_sample(model, compiled, one_path, atol=ATOL) == 1
    assert assert_per_sample(model, compiled, samples[:1], atol=ATOL) == 1


def test_the_saved_host_agrees_without_torch(policy_net):
    model, _, samples, artifact = policy_net
    report = saved_host_report(artifact, model, samples, samples[3], atol=ATOL)
    assert report == {"checked": 2, "problems": [], "torch_loaded": False}
