"""Weights written behind the version counters (``param.data``, numpy views, the storage) are refused
on the next call by a fixed sample of their contents (``dycl.in_process.weight_contents``); a write
the sample misses is refused by ``dycl.check``, which hashes every byte."""

from __future__ import annotations

import copy
import pickle
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
import torch.nn as nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch
from dycl.in_process.staleness import StaleWeightsError
from dycl.in_process.weight_contents import ContentDigest, ContentSample


class GatedHead(nn.Module):
    """A classifier head that takes a small branch when the features are mostly positive."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(4, 16), nn.BatchNorm1d(16), nn.ReLU())
        self.small = nn.Linear(16, 2)
        self.large = nn.Sequential(nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 2))

    def forward(self, x):
        h = self.features(x)
        if h.mean() > 0.4:
            return self.small(h)
        return self.large(h)


def _inputs(count: int = 24) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    return [torch.randn(1, 4, generator=generator) * (0.2 + i % 6) for i in range(count)]


def _gated():
    torch.manual_seed(1)
    model = GatedHead().eval()
    with torch.no_grad():  # running statistics as after training: the buffers are not all zeros and ones
        model.features[1].running_mean.uniform_(-0.5, 0.5)
        model.features[1].running_var.uniform_(0.5, 2.0)
    return model, dycl.compile(model, torch.randn(1, 4))


@pytest.fixture(scope="module")
def gated():
    return _gated()


def _ema(model):
    target = model.large[0].weight
    target.data.mul_(0.9).add_(torch.randn_like(target), alpha=0.1)


def _prune(model):
    weight = model.large[0].weight
    weight.data *= weight.abs() > weight.abs().median()


def _storage(model):
    model.small.bias.untyped_storage().fill_(0)


WRITES = {
    "data.mul_": (lambda m: m.features[0].weight.data.mul_(3), "features.0.weight"),
    "numpy": (lambda m: m.small.weight.detach().numpy().__setitem__(slice(None), 0), "small.weight"),
    "data.copy_": (lambda m: m.large[2].weight.data.copy_(torch.randn(2, 16)), "large.2.weight"),
    "data.normal_": (lambda m: m.large[2].bias.data.normal_(), "large.2.bias"),
    "data.zero_": (lambda m: m.small.bias.data.zero_(), "small.bias"),
    "data.clamp_": (lambda m: m.features[0].weight.data.clamp_(-0.01, 0.01), "features.0.weight"),
    "ema": (_ema, "large.0.weight"),
    "pruning": (_prune, "large.0.weight"),
    "buffer fill_": (lambda m: m.features[1].running_mean.data.fill_(0.25), "features.1.running_mean"),
    "untyped_storage": (_storage, "small.bias"),
}


@pytest.mark.parametrize("write", list(WRITES))
def test_a_write_behind_the_counters_is_refused_and_restoring_it_is_not(gated, write):
    model, compiled = gated
    saved = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    versions = [tensor._version for tensor in model.state_dict().values()]
    change, name = WRITES[write]
    try:
        with torch.no_grad():
            change(model)
        assert [tensor._version for tensor in model.state_dict().values()] == versions  # no counter saw it
        with pytest.raises(StaleWeightsError, match=name.replace(".", r"\.")):
            compiled(_inputs(1)[0])
    finally:
        with torch.no_grad():  # the old values again, behind the counters as well: nothing to refuse
            for key, tensor in model.state_dict().items():
                tensor.data.copy_(saved[key])
    assert assert_equivalent(model, compiled, _inputs(), min_paths=2, atol=1e-5) == 2


def test_the_untouched_model_agrees_with_eager_in_process_and_as_host(gated, tmp_path):
    model, compiled = gated
    assert len(compiled._guard.sample) >= 2 * len(compiled._guard._tensors)  # first and last of each, at least
    assert assert_equivalent(model, compiled, _inputs(), min_paths=2, atol=1e-5) == 2
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, _inputs(), 1e-5)
    assert report["checked"] == len(_inputs()) and report["problems"] == []


def test_concurrent_calls_agree_with_eager(gated):
    model, compiled = gated
    inputs = _inputs(48)
    with torch.no_grad():
        expected = [model(x) for x in inputs]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(compiled, inputs * 4))
    assert all(torch.allclose(got, expected[i % len(inputs)], atol=1e-5) for i, got in enumerate(results))
    assert len({bool(model.features(x).mean() > 0.4) for x in inputs}) == 2  # both paths ran


class Lookup(nn.Module):
    """Picks features by an index buffer, scales them by a half-precision buffer, masks some out."""

    def __init__(self):
        super().__init__()
        self.register_buffer("index", torch.tensor([3, 0, 2, 1, 1], dtype=torch.int64))
        self.register_buffer("scale", torch.tensor([0.5, 2.0, 1.5, -1.0, 0.25], dtype=torch.float16))
        self.register_buffer("keep", torch.tensor([True, True, False, True, True]))
        self.out = nn.Linear(5, 3)

    def forward(self, x):
        h = x[:, self.index] * self.scale.float() * self.keep.float()
        if h.sum() > 0:
            return self.out(h)
        return -self.out(h).relu()


@pytest.mark.parametrize("buffer", ["index", "scale", "keep"])
def test_fp16_int64_and_bool_buffers(buffer, tmp_path):
    torch.manual_seed(4)
    model = Lookup().eval()
    compiled = dycl.compile(model, torch.randn(1, 4))
    inputs = _inputs()
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5) == 2
    if buffer == "index":
        report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, inputs, 1e-5)
        assert report["problems"] == []
    tensor = getattr(model, buffer)
    tensor.data[-1] = {"index": 2, "scale": 3.0, "keep": False}[buffer]
    with pytest.raises(StaleWeightsError, match=buffer):
        compiled(inputs[0])


def test_dycl_check_catches_a_write_the_sample_misses():
    torch.manual_seed(5)
    model = nn.Sequential(nn.Linear(4, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 2)).eval()
    compiled = dycl.compile(model, torch.randn(1, 4))
    weight = model[2].weight  # 8192 elements, more than the whole sample: element 1 lies between two sampled ones
    old = weight.data.view(-1)[1].item()
    weight.data.view(-1)[1] += 1.0
    compiled(torch.randn(1, 4))  # the per-call sample does not see it (the README says so)
    with pytest.raises(StaleWeightsError, match=r"2\.weight"):
        dycl.check(model, compiled, [torch.randn(1, 4)], repeat=0, traced=False, progress=False)
    weight.data.view(-1)[1] = old
    report = dycl.check(model, compiled, [torch.randn(1, 4) for _ in range(4)], repeat=0, traced=False,
                        progress=False)
    assert report.eta == 0.0


def test_the_torch_backend_runs_the_written_weights_as_eager_does():
    model, _ = _gated()
    compiled = dycl.compile(model, torch.randn(1, 4), backend="torch")
    with torch.no_grad():
        model.features[0].weight.data.mul_(3)
        model.small.weight.detach().numpy()[:] = 0
    assert assert_equivalent(model, compiled, _inputs(), min_paths=2, atol=1e-5) == 2
    with torch.no_grad():
        model.small.weight.add_(1)  # a write the version counter sees: refused as before
    with pytest.raises(StaleWeightsError, match=r"small\.weight"):
        compiled(_inputs(1)[0])


def test_the_sample_reads_views_offsets_and_scalars_and_stays_bounded():
    torch.manual_seed(6)
    tensors = [torch.randn(40, 30).t(), torch.randn(40, 30)[5:, 3:7], torch.tensor(2.5, dtype=torch.float64),
               torch.arange(9, dtype=torch.int16),               torch.randn(500, 20)]
    sample, digest = ContentSample(tensors, budget=64), ContentDigest(tensors)
    assert 2 * len(tensors) <= len(sample) <= 64 * 4  # words of 2 bytes: an fp64 element is 4 of them
    assert sample.same() and digest.changed() == []
    for position, element in [(0, (-1, -1)), (1, (0, 0)), (2, ()), (3, (-1,)), (4, (0, 0))]:
        old = tensors[position][element].item()
        tensors[position].data[element] = old + 1
        assert not sample.same() and sample.changed() == [position] and digest.changed() == [position]
        tensors[position].data[element] = old
        assert sample.same() and digest.changed() == []
    tensors[4].data[250, 10] += 1  # between two sampled elements: the digest alone sees it
    assert sample.same() and digest.changed() == [4]
    for copier in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError, match="compile the copied model"):
            copier(sample)
