"""The opt-in ONNX export cache (issue 31, point 10): a second compile of the same model
is a cache hit, agrees with eager, and a changed weight misses."""

from __future__ import annotations

import logging

import pytest
import torch
import torch.nn as nn

import dycl
from dycl.backends.ort_cache import ENVIRONMENT


class Exit(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(4, 8)
        self.exit = nn.Linear(8, 3)
        self.body = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))

    def forward(self, x):
        h = self.stem(x).relu()
        early = self.exit(h)
        if early.softmax(-1).max() > 0.5:
            return early
        return self.body(h)


def _no_export(*args, **kwargs):
    raise AssertionError("exported although the cache holds this sub-DNN")


def test_a_second_compile_reads_every_export_from_the_cache_and_agrees_with_eager(tmp_path, monkeypatch, caplog):
    torch.manual_seed(0)
    model = Exit().eval()
    first = dycl.compile(model, torch.randn(1, 4), cache_dir=tmp_path / "cache")
    stored = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert stored and all(name.endswith((".onnx", ".json")) for name in stored)

    monkeypatch.setattr("dycl.backends.onnxruntime.export_onnx", _no_export)
    with caplog.at_level(logging.DEBUG, logger="dycl.cache"):
        second = dycl.compile(model, torch.randn(1, 4), cache_dir=tmp_path / "cache")
    assert sum("compile cache hit" in r.getMessage() for r in caplog.records) == first.stats["unique_compiled"]
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == stored  # nothing new written
    for scale in (0.1, 1.0, 10.0):
        x = torch.randn(3, 4) * scale
        torch.testing.assert_close(second(x), model(x), atol=1e-5, rtol=1e-4)

    with torch.no_grad():
        model.exit.weight.add_(1.0)  # other weights: another key, so the export runs (and is refused here)
    with pytest.raises(AssertionError, match="exported although"):
        dycl.compile(model, torch.randn(1, 4), cache_dir=tmp_path / "cache")


def test_the_environment_variable_names_the_directory_and_nothing_is_cached_without_it(tmp_path, monkeypatch):
    monkeypatch.delenv(ENVIRONMENT, raising=False)
    monkeypatch.chdir(tmp_path)
    dycl.compile(Exit().eval(), torch.randn(1, 4))
    assert not list(tmp_path.iterdir())
    monkeypatch.setenv(ENVIRONMENT, str(tmp_path / "env-cache"))
    dycl.compile(Exit().eval(), torch.randn(1, 4))
    assert list((tmp_path / "env-cache").glob("*.onnx"))
