"""Issue 19 item 6: a saved per-sample artifact served by Ray Serve
(``notebooks/serve_deployment.py``) answers concurrent single-sample requests with
what eager gives each sample alone, in batches the engine gathered, from replicas
that never import torch or dycl. Skipped without the serve extra; slow (Ray starts
in ~15 s): ``make test-serve``."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("ray.serve", reason="Ray Serve is not installed (the serve extra): run `make test-serve`, "
                                        "or pip install -c constraints.txt -e '.[serve]'")

import dycl  # noqa: E402
from dycl.harness.testing import outputs_match  # noqa: E402
from dycl.per_sample.testing import diverse, paths_of  # noqa: E402
from models import sdn_vgg19  # noqa: E402

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
ATOL = 1e-4  # ORT against eager on float logits, as in tests/per_sample
REQUESTS = 24


@pytest.fixture
def serving(monkeypatch):
    """The example's modules, imported by name as the replicas import them."""
    monkeypatch.syspath_prepend(str(NOTEBOOKS))
    import serve_deployment
    import serve_per_sample

    yield serve_deployment, serve_per_sample
    for name in ("serve_deployment", "serve_per_sample"):
        sys.modules.pop(name, None)


async def _gather(handle, requests):
    return await asyncio.gather(*[handle.remote(request) for request in requests], return_exceptions=True)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")
def test_concurrent_single_sample_requests_are_batched_and_match_eager(serving, tmp_path):
    import ray

    deployment, example = serving
    model, one_sample = sdn_vgg19.build()
    artifact = dycl.compile(model, one_sample, per_sample=True, progress=False).save(tmp_path / "artifact")
    candidates = [sdn_vgg19.sample(seed) for seed in range(32)]
    paths = paths_of(model, candidates)
    picked = diverse(paths, REQUESTS)
    distinct = len({paths[i] for i in picked})
    assert distinct >= 3, f"the requests take {distinct} distinct path(s); need 3"

    requests = [candidates[i].numpy() for i in picked]
    two_samples = np.concatenate(requests[:2])  # must be refused alone, not shift the others' rows
    wrong_size = np.zeros((1, 3, 16, 16), np.float32)  # the host refuses it; only its own call fails
    example.start_ray()
    try:
        handle = deployment.start(artifact, max_batch_size=8, batch_wait_timeout_s=0.05)
        outputs, latencies = example.send_concurrently(handle, requests)
        bad = asyncio.run(_gather(handle, requests[:6] + [two_samples, wrong_size] + requests[6:12]))
        stats = handle.stats.remote().result()
    finally:
        example.stop_ray()
    assert not ray.is_initialized()

    assert isinstance(bad[6], ValueError) and "one sample" in str(bad[6]), bad[6]
    assert isinstance(bad[7], Exception) and "32" in str(bad[7]), bad[7]
    for output, expected in zip(bad[:6] + bad[8:], outputs[:12]):
        assert isinstance(output, np.ndarray) and np.allclose(output, expected, atol=ATOL, rtol=0)

    with torch.no_grad():
        for i, output in zip(picked, outputs):
            problem = outputs_match(model(candidates[i]), torch.from_numpy(output), ATOL)
            assert problem is None, f"request for sample {i} (path {paths[i]}): {problem}"
    assert sum(stats["batch_sizes"]) == REQUESTS + 12 + 1  # the one-sample requests of both rounds, wrong_size
    assert max(stats["batch_sizes"]) > 1, f"no request was batched with another: {stats['batch_sizes']}"
    assert max(stats["batch_sizes"]) <= 8
    assert stats["imported"] == []
    assert len(latencies) == REQUESTS


def test_split_takes_each_sample_back_out_of_the_hosts_join(serving):
    deployment, _ = serving
    logits = np.arange(6.0).reshape(3, 2)
    joined = ({"logits": logits, "exit": [0, 2, 1]}, [np.zeros(2), np.ones(4), np.ones(1)])
    sample = deployment.split(joined, 1)
    assert np.array_equal(sample[0]["logits"], logits[1:2]) and sample[0]["exit"] == 2
    assert np.array_equal(sample[1], np.ones(4))
    with pytest.raises(TypeError):
        deployment.split(3.0, 0)
    stacked = deployment.stack([(logits[:1], 7), (logits[1:2], 7)])
    assert np.array_equal(stacked[0], logits[:2]) and stacked[1] == 7


def test_a_request_is_one_sample(serving):
    deployment, _ = serving
    deployment.check_sample((np.zeros((1, 3)), 5), tensors=(0,))
    deployment.check_sample((), tensors=(0,))  # omitted: the host decides
    for bad in (np.zeros((2, 3)), np.zeros(()), [[0.0, 1.0]]):
        with pytest.raises(ValueError, match="one sample"):
            deployment.check_sample((bad,), tensors=(0,))


def test_only_requests_of_one_signature_share_a_host_call(serving):
    deployment, _ = serving
    sig = deployment.signature
    assert sig((np.zeros((1, 4), np.float32), 3)) == sig((np.ones((1, 4), np.float32), 3))
    assert sig((np.zeros((1, 4), np.float32),)) != sig((np.zeros((1, 5), np.float32),))
    assert sig((np.zeros((1, 4), np.float32),)) != sig((np.zeros((1, 4), np.float64),))
    assert sig((np.zeros((1, 4)), 1)) != sig((np.zeros((1, 4)), True))
    assert sig((np.zeros((1, 4)), [1])) != sig((np.zeros((1, 4)), [1]))  # unhashable: each alone


def test_an_artifact_not_compiled_per_sample_is_refused(serving, tmp_path):
    deployment, _ = serving
    inputs = [{"kind": "tensor", "name": "x"}, {"kind": "int", "name": "n"}, {"kind": "tensor", "name": "m"}]
    (tmp_path / "manifest.json").write_text(json.dumps({"per_sample": True, "inputs": inputs}))
    assert deployment.tensor_positions(tmp_path) == (0, 2)
    (tmp_path / "manifest.json").write_text(json.dumps({"per_sample": False, "inputs": inputs}))
    with pytest.raises(ValueError, match="per_sample=True"):
        deployment.tensor_positions(tmp_path)
