"""Issue 29 lever 2: each ONNX Runtime sub-DNN's thread chosen by its cost, counted where
the count settles it and timed on its example where it does not (``dycl.backends.thread_choice``);
the manifest carries the choice, and the compiled model computes the same either way."""

from __future__ import annotations

import io
import time

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from dycl.hcfg.levers import Levers

import dycl
from dycl.backends import thread_choice
from dycl.backends.onnx_cost import CALLING_THREAD_MACS, macs
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch

#: the host form, whose sub-DNNs' threads these tests read ("auto" may pick the one graph by timing)
HOST_FORM = Levers(single_graph="off")

ATOL = 1e-4


class DenoiseOrSharpen(nn.Module):
    """An image block: a 3x3 convolution stack, then a denoiser for noisy inputs and a
    sharpening convolution otherwise (a few million MACs each: neither end of the count)."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1))
        self.denoise = nn.Conv2d(32, 3, 5, padding=2)
        self.sharpen = nn.Conv2d(32, 3, 3, padding=1)

    def forward(self, image):
        h = F.relu(self.features(image))
        if h.std() > 0.5:
            return torch.sigmoid(self.denoise(h))
        return self.sharpen(h) + image


def _images() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(5)
    return [torch.randn(1, 3, 40, 40, generator=generator) * scale for scale in (0.2, 0.5, 1, 2, 4) for _ in range(3)]


def _onnx(module: nn.Module, example: torch.Tensor) -> bytes:
    buffer = io.BytesIO()
    torch.onnx.export(module.eval(), (example,), buffer, dynamo=False, input_names=["x"])
    return buffer.getvalue()


def test_the_count_settles_both_ends_without_timing(monkeypatch):
    monkeypatch.setattr(thread_choice, "time_both", lambda *_: pytest.fail("timed a graph the count settles"))
    small, big = nn.Linear(64, 64), nn.Conv2d(64, 64, 3, padding=1)
    small_x, big_x = torch.randn(1, 64), torch.randn(1, 64, 64, 64)
    assert macs(_onnx(small, small_x), {"x": (1, 64)}) <= CALLING_THREAD_MACS
    assert thread_choice.on_calling_thread(_onnx(small, small_x), {"x": small_x}, threads=2)
    assert macs(_onnx(big, big_x), {"x": (1, 64, 64, 64)}) > thread_choice.POOL_MACS
    assert not thread_choice.on_calling_thread(_onnx(big, big_x), {"x": big_x}, threads=2)


def test_between_the_ends_the_faster_setting_on_the_example_wins(monkeypatch):
    conv, x = nn.Conv2d(16, 16, 3, padding=1), torch.randn(1, 16, 48, 48)
    data = _onnx(conv, x)
    assert CALLING_THREAD_MACS < macs(data, {"x": tuple(x.shape)}) <= thread_choice.POOL_MACS
    one, pool = thread_choice.time_both(data, {"x": x.numpy()}, threads=2)  # really runs both sessions
    assert one > 0 and pool > 0
    assert not thread_choice.on_calling_thread(data, {"y": x}, threads=2)  # no example for its input: untimed, pool
    assert thread_choice.on_calling_thread(data, {"x": x}, threads=1)  # no pool to hand off to
    for timed, expected in (((1e-4, 2e-4), True), ((2e-4, 1e-4), False), (None, False)):
        monkeypatch.setattr(thread_choice, "time_both", lambda *_, timed=timed: timed)
        assert thread_choice.on_calling_thread(data, {"x": x}, threads=2) is expected


@pytest.mark.parametrize("faster", ["calling thread", "pool"])
def test_the_manifest_follows_the_timing_and_both_agree_with_eager(faster, monkeypatch, tmp_path):
    timings = {"calling thread": (1e-4, 2e-4), "pool": (2e-4, 1e-4)}[faster]
    asked: list[dict] = []

    def timed(data, arrays, threads):
        asked.append({name: np.shape(array) for name, array in arrays.items()})
        return timings

    monkeypatch.setattr(thread_choice, "time_both", timed)
    torch.manual_seed(3)
    model = DenoiseOrSharpen().eval()
    compiled = dycl.compile(model, _images()[0], optimize=HOST_FORM)
    threads = {entry.threads for entry in compiled.manifest.sub_dnns.values()}
    assert asked and threads == ({1} if faster == "calling thread" else {None})
    assert assert_equivalent(model, compiled, _images(), min_paths=2, atol=ATOL) == 2
    artifact = compiled.save(tmp_path / "artifact")
    loaded = dycl.load(artifact, threads=2)
    sessions = [executable.session for variants in loaded._host._variants.values() for executable in variants.values()]
    assert {s.get_session_options().intra_op_num_threads for s in sessions} == {1 if faster == "calling thread" else 2}
    assert assert_equivalent(model, loaded, _images(), min_paths=2, atol=ATOL) == 2
    report = run_host_without_torch(artifact, model, _images(), ATOL)
    assert report["checked"] == len(_images()) and not report["problems"], report


class ResidualStages(nn.Module):
    """Residual blocks of one width, each skipped when its input is already small (a block-drop
    policy as people write it): the blocks' graphs differ only in their weights."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.ReLU()) for _ in range(4))

    def forward(self, image):
        for block in self.blocks:
            if image.abs().mean() > 0.3:
                image = image + block(image)
        return image


def test_graphs_of_one_structure_are_timed_once_per_compile(monkeypatch, tmp_path):
    conv, x = nn.Conv2d(16, 16, 3, padding=1), torch.randn(1, 16, 48, 48)
    other = nn.Conv2d(16, 16, 3, padding=1)
    timed: list[tuple] = []
    monkeypatch.setattr(thread_choice, "time_both", lambda data, arrays, threads: timed.append(data) or (1e-4, 2e-4))
    settled: dict[str, bool] = {}
    assert thread_choice.on_calling_thread(_onnx(conv, x), {"x": x}, threads=2, settled=settled)
    assert thread_choice.on_calling_thread(_onnx(other, x), {"x": x}, threads=2, settled=settled)  # other weights
    assert len(timed) == 1
    wider = torch.randn(1, 16, 64, 64)
    thread_choice.on_calling_thread(_onnx(conv, wider), {"x": wider}, threads=2, settled=settled)  # other shapes
    thread_choice.on_calling_thread(_onnx(nn.Conv2d(16, 16, 5, padding=2), x), {"x": x}, threads=2, settled=settled)
    assert len(timed) == 3
    thread_choice.on_calling_thread(_onnx(conv, x), {"x": x}, threads=2)  # no settled answers: timed
    assert len(timed) == 4

    timed.clear()
    torch.manual_seed(3)
    model = ResidualStages().eval()
    images = [torch.randn(1, 16, 32, 32) * scale for scale in (0.1, 0.4, 2.0) for _ in range(3)]
    compiled = dycl.compile(model, images[2], optimize=HOST_FORM)
    blocks = [n for n, e in compiled.manifest.sub_dnns.items() if e.threads == 1]
    assert len(blocks) >= 4 and 1 <= len(timed) < len(blocks), (blocks, len(timed))
    assert assert_equivalent(model, compiled, images, min_paths=2, atol=ATOL) == 2
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, images, ATOL)
    assert report["checked"] == len(images) and not report["problems"], report


class _Session:
    """A stand-in session that takes ``seconds`` per run and counts its runs."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.runs = seconds, 0

    def get_inputs(self):
        return [type("Port", (), {"name": "x", "type": "tensor(float)"})()]

    def run(self, outputs, feeds):
        self.runs += 1
        end = time.perf_counter() + self.seconds
        while time.perf_counter() < end:
            pass


def test_settings_whose_times_do_not_overlap_stop_after_a_few_turns(monkeypatch):
    monkeypatch.setattr(thread_choice, "TIMING_BUDGET_S", 10.0)  # only the separation may stop it
    sessions = {1: _Session(0.0), 2: _Session(0.004)}
    monkeypatch.setattr(thread_choice, "_session", lambda data, threads: sessions[threads])
    one, pool = thread_choice.time_both(b"", {"x": np.zeros(3, np.float32)}, threads=2)
    assert one < pool
    assert sessions[1].runs == sessions[2].runs == 1 + thread_choice.SEPARATED_TURNS  # the warm-up, then 3 turns
    assert thread_choice._separated(([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]), 3)
    assert not thread_choice._separated(([1.0, 2.0, 5.0], [4.0, 5.0, 6.0]), 3)  # overlapping: more turns
    assert not thread_choice._separated(([1.0, 2.0], [4.0, 5.0]), 2)  # too few turns to tell


def test_a_near_tie_goes_to_the_calling_thread_and_a_clear_win_to_the_pool(monkeypatch):
    conv, x = nn.Conv2d(16, 16, 3, padding=1), torch.randn(1, 16, 48, 48)
    data = _onnx(conv, x)
    margin = thread_choice.POOL_MARGIN
    for pool_share, expected in ((1.0, True), (1 / (1 + margin / 2), True), (1 / (1 + 2 * margin), False)):
        monkeypatch.setattr(thread_choice, "time_both", lambda *_, share=pool_share: (1e-3, 1e-3 * share))
        assert thread_choice.on_calling_thread(data, {"x": x}, threads=2) is expected, pool_share
