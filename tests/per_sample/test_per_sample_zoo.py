"""Issue 19's acceptance on every zoo model: with ``per_sample=True`` a batch of 16
samples over at least 3 eager paths, a batch whose samples all take one path, and
batches of one give each sample what eager gives it alone, in process and through
the torch-free saved host. One model runs in ``make test``; the others are slow
(compiling a zoo model takes 5-30 s): ``pytest -m slow tests/per_sample``."""

from __future__ import annotations

import importlib

import pytest

import dycl
from dycl.harness.testing_host import run_host_without_torch
from dycl.per_sample.testing import PerSampleEager, assert_per_sample, batch_of, diverse, one_path, paths_of
from models import ZOO

ATOL = 1e-4  # ORT against eager on float logits (the zoo tests' delta <= -4); tokens compare exactly
FAST = ("models.sdn_wrn32_4",)


def _marked(name: str):
    return name if name in FAST else pytest.param(name, marks=pytest.mark.slow)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", [_marked(name) for name in ZOO])
def test_zoo_model_per_sample(name, tmp_path):
    zoo = importlib.import_module(name)
    model, example = zoo.build()
    compiled = dycl.compile(model, example, per_sample=True, progress=False)
    candidates = [zoo.sample(seed) for seed in range(32)]
    paths = paths_of(model, candidates)

    mixed = diverse(paths, 16)
    pick = [candidates[i] for i in mixed]
    assert assert_per_sample(model, compiled, pick, 3, ATOL, [paths[i] for i in mixed]) >= 3
    same = one_path(paths, 16)
    assert assert_per_sample(model, compiled, [candidates[i] for i in same], 1, ATOL, [paths[i] for i in same]) == 1
    for i in mixed[:3]:  # batch 1, on three different paths
        assert_per_sample(model, compiled, [candidates[i]], atol=ATOL, paths=[paths[i]])

    artifact = compiled.save(tmp_path / "artifact")
    batches = [batch_of(pick)[0], batch_of([candidates[i] for i in same])[0], pick[0]]
    report = run_host_without_torch(artifact, PerSampleEager(model), batches, atol=ATOL)
    assert report == {"checked": 3, "problems": [], "torch_loaded": False}
