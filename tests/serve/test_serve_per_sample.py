"""Issue 19 item 6: a saved per-sample artifact served by Ray Serve
(``notebooks/serve_deployment.py``) answers concurrent single-sample requests with
what eager gives each sample alone, in batches the engine gathered, from replicas
that never import torch or dycl. Skipped without the serve extra; slow (Ray starts
in ~15 s): ``make test-serve``."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("ray.serve", reason="Ray Serve is not installed (the serve extra): run `make test-serve`, "
                                        "or pip install -c constraints.txt -e '.[serve]'")

import dycl  # noqa: E402
from dycl.per_sample_testing import diverse, paths_of  # noqa: E402
from dycl.testing import outputs_match  # noqa: E402
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

    example.start_ray()
    try:
        handle = deployment.start(artifact, max_batch_size=8, batch_wait_timeout_s=0.05)
        outputs, latencies = example.send_concurrently(handle, [candidates[i].numpy() for i in picked])
        stats = handle.stats.remote().result()
    finally:
        example.stop_ray()
    assert not ray.is_initialized()

    with torch.no_grad():
        for i, output in zip(picked, outputs):
            problem = outputs_match(model(candidates[i]), torch.from_numpy(output), ATOL)
            assert problem is None, f"request for sample {i} (path {paths[i]}): {problem}"
    assert sum(stats["batch_sizes"]) == REQUESTS
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
