"""Issue 19 on small hand-written models: ``per_sample=True`` gives every sample of a
batch what eager gives it alone, runs each sub-DNN once per group, keeps statements
that reduce over the whole tensor per sample, and validates the batch."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from dycl.hcfg.levers import Levers

import dycl
from dycl.harness.testing import outputs_match
from dycl.harness.testing_host import run_host_without_torch
from dycl.per_sample.testing import PerSampleEager, assert_per_sample, batch_of, diverse, one_path, paths_of
from tests.per_sample import nets

ATOL = 1e-5
pytestmark = pytest.mark.filterwarnings("ignore")


def _mixed(model, samples, size):
    """``size`` of ``samples``, over as many eager paths as they take."""
    return [samples[i] for i in diverse(paths_of(model, samples), size)]


def _same(model, samples, size):
    """``size`` of ``samples`` that all take one eager path."""
    return [samples[i] for i in one_path(paths_of(model, samples), size)]


def _samples(shape, count, scale=1.0, offset=0):
    return [scale * torch.randn(*shape, generator=torch.Generator().manual_seed(offset + s)) for s in range(count)]


@pytest.fixture(scope="module")
def early_exit():
    model = nets.EarlyExitMLP().eval()
    samples = _samples((1, 8), 48, scale=3.0)
    # routed: these tests are about the router (test_per_sample_predicate.py: the if-converted form)
    return model, dycl.compile(model, samples[0], per_sample=True, progress=False,
                               optimize=Levers(predicate=False)), samples


def test_a_batch_of_16_over_three_paths_equals_eager_per_sample(early_exit):
    model, compiled, samples = early_exit
    assert assert_per_sample(model, compiled, _mixed(model, samples, 16), min_paths=3, atol=ATOL) == 3


def test_a_batch_on_one_path_and_a_batch_of_one(early_exit):
    model, compiled, samples = early_exit
    assert assert_per_sample(model, compiled, _same(model, samples, 16), atol=ATOL) == 1
    for sample in samples[:6]:  # batch 1, over all three paths
        assert_per_sample(model, compiled, [sample], atol=ATOL)
    assert len(set(paths_of(model, samples[:6]))) == 3


def test_each_sub_dnn_runs_once_per_group(early_exit):
    model, compiled, samples = early_exit
    chosen = _mixed(model, samples, 16)
    _, groups = compiled._host.route(batch_of(chosen)[0].numpy())
    with torch.no_grad():
        hidden = [model.stem(x) for x in chosen]
        going_on = [h for h in hidden if not F.softmax(model.head1(h), -1).max() > model.threshold]
        doubled = sum(bool(model.block(h).mean() > 0) for h in going_on)
    # stem and first exit on the whole batch; the block on those that go on; each last head on its group
    assert groups == [(0, 16), (1, len(going_on)), (2, doubled), (3, len(going_on) - doubled)]
    assert 0 < doubled < len(going_on) < 16


def test_a_statement_that_reduces_over_the_whole_tensor_stays_per_sample():
    model = nets.WholeTensorNorm().eval()
    samples = _samples((1, 5), 16)
    compiled = dycl.compile(model, samples[0], per_sample=True, progress=False)
    assert assert_per_sample(model, compiled, samples, min_paths=2, atol=ATOL) == 2
    batch = batch_of(samples)
    # the same statements run on the batch at once mix the samples: the check above can fail
    with torch.no_grad():
        mixed = model(*batch)
    assert outputs_match(PerSampleEager(model)(*batch), mixed, ATOL) is not None
    # outputs whose shape differs between samples come back as a list, one entry per sample
    result = compiled(*batch)
    assert isinstance(result[0], list) and len(result[0]) == 16


def test_a_loop_with_break_keeps_host_counters_per_sample():
    model = nets.GatedRefine().eval()
    samples = _samples((1, 6), 24, scale=2.0)
    compiled = dycl.compile(model, samples[0], per_sample=True, progress=False)
    chosen = _mixed(model, samples, 16)
    assert assert_per_sample(model, compiled, chosen, min_paths=3, atol=ATOL) >= 3
    hidden, steps = compiled(batch_of(chosen)[0])
    assert hidden.shape == (16, 6) and len(set(steps)) >= 3  # stacked tensor; per-sample Python ints


def test_two_inputs_and_the_host_validates_the_batch(tmp_path):
    model = nets.TwoInputs().eval()
    samples = list(zip(_samples((1, 3), 16), _samples((1, 3), 16, offset=100)))
    compiled = dycl.compile(model, samples[0], per_sample=True, progress=False)
    assert assert_per_sample(model, compiled, samples, min_paths=2, atol=ATOL) == 2
    x, y = batch_of(samples)
    with pytest.raises(ValueError, match="'y'.*expected 16"):
        compiled(x, y[:5])
    with pytest.raises(ValueError, match="expected shape \\[samples, 3\\]"):
        compiled(x, torch.randn(16, 4))
    assert compiled.manifest["per_sample"] is True
    assert compiled.manifest["inputs"][0]["shape"] == ["samples", 3]


def test_the_saved_host_runs_batches_without_torch(early_exit, tmp_path):
    model, compiled, samples = early_exit
    artifact = compiled.save(tmp_path / "early_exit")
    assert json.loads((artifact / "manifest.json").read_text())["per_sample"] is True
    batches = [batch_of(_mixed(model, samples, 16))[0], batch_of(_same(model, samples, 8))[0], samples[0]]
    report = run_host_without_torch(artifact, PerSampleEager(model), batches, atol=ATOL)
    assert report == {"checked": 3, "problems": [], "torch_loaded": False}
    loaded = dycl.load(artifact)
    assert outputs_match(PerSampleEager(model)(batches[0]), loaded(batches[0]), ATOL) is None
    np.save(tmp_path / "x.npy", batches[0].numpy())  # and from a shell
    subprocess.run([sys.executable, str(artifact / "host.py"), str(tmp_path / "x.npy"), "--out",
                    str(tmp_path / "out.npz")], check=True, capture_output=True, timeout=120)
    expected = PerSampleEager(model)(batches[0]).numpy()
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["output"], expected, atol=ATOL, rtol=0)


def test_what_per_sample_refuses():
    model = nets.EarlyExitMLP().eval()
    with pytest.raises(ValueError, match="leading batch dim of 1"):
        dycl.compile(model, torch.randn(2, 8), per_sample=True, progress=False)
    with pytest.raises(ValueError, match="per_sample=True is implemented for backend 'onnxruntime'"):
        dycl.compile(model, torch.randn(1, 8), per_sample=True, backend="torch", progress=False)


def test_the_group_file_is_exact_per_row():
    """The Scan-wrapped file of a sub-DNN that reduces over its whole input."""
    import io

    import onnxruntime as ort

    from dycl.per_sample.group_onnx import scan_over_samples

    class Sub(torch.nn.Module):
        def forward(self, x, k):
            return x - x.mean(), (x.view(-1).max() > k), x

    buffer = io.BytesIO()
    torch.onnx.export(Sub(), (torch.randn(1, 4), torch.tensor(0.5)), buffer, dynamo=False, opset_version=17,
                      input_names=["x", "k"], output_names=["centred", "flag", "same"])
    session = ort.InferenceSession(scan_over_samples(buffer.getvalue()))
    x, k = np.random.default_rng(0).normal(size=(6, 1, 4)).astype(np.float32), np.full(6, 0.5, np.float32)
    centred, flag, same = session.run(None, {"x": x, "k": k})
    for row in range(6):
        np.testing.assert_allclose(centred[row], x[row] - x[row].mean(), atol=1e-6)
        assert flag[row] == (x[row].max() > 0.5)
    np.testing.assert_array_equal(same, x)


def test_the_sample_program_is_the_single_sample_host_with_requests(early_exit):
    """Golden: each sub-DNN call of the one-sample host becomes a request to the router."""
    _, compiled, _ = early_exit
    source = compiled.host_source
    start = source.index("    def _sample(self, x):")
    assert source[start:source.index("\n\n", start)] == '''\
    def _sample(self, x):
        h, logits, t = (yield (0, (), (x,)))  # nets.py:23
        if t:  # nets.py:25
            return logits  # nets.py:26
        h, t_1 = (yield (1, (), (h,)))  # nets.py:27
        if t_1:  # nets.py:28
            t_2, = (yield (2, (), (h,)))  # nets.py:29
            return t_2  # nets.py:29
        t_3, = (yield (3, (), (h,)))  # nets.py:30
        return t_3  # nets.py:30'''
    assert "ORDER = {0: 0, 1: 1, 2: 2, 3: 3}" in source and "SAMPLE_INPUTS = ['x']" in source


def test_a_host_dict_read_by_a_sub_dnn_is_passed_per_sample():
    """Regression (per-sample fuzz, seed 3 program 15): the router passed the dict itself. The
    numbers the tensor code reads out of it are now read on the host, per sample
    (``hcfg.host_reads``), so no dict reaches the sub-DNN."""
    model = nets.ConfiguredScale().eval()
    samples = _samples((1, 4), 16, scale=2.0)
    compiled = dycl.compile(model, samples[0], per_sample=True, progress=False)
    assert 'n = cfg["scale"]' in compiled.host_source
    assert assert_per_sample(model, compiled, samples, min_paths=2, atol=ATOL) == 2
    assert_per_sample(model, compiled, samples[:1], atol=ATOL)
