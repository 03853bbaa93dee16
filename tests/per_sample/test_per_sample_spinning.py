"""Spinning within runs for a per-sample model's pools (``dycl.backends.spin_choice``): the
compile times the chain of its graphs at a group of 32 samples, spinning or not, writes the
answer in the manifest, and the host's sessions spin only while a run lasts. The choice changes
how pools wait, never what a batch computes: forced either way, every sample gets what eager
gives it alone, in process and through the saved torch-free host."""

from __future__ import annotations

import json
import time

import numpy as np
import onnxruntime as ort
import pytest
import torch
import torch.nn.functional as F
from dycl.hcfg.levers import Levers
from torch import nn

import dycl
import dycl.compiler
from dycl.backends import ort_runtime, spin_choice
from dycl.per_sample.testing import assert_per_sample, diverse, paths_of, saved_host_report

ATOL = 1e-5
pytestmark = pytest.mark.filterwarnings("ignore")


class ConfidentCNN(nn.Module):
    """An early-exit image classifier as people write one: a cheap head answers when sure."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(3)
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.quick = nn.Linear(8 * 8 * 8, 4)
        self.deep = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(16, 4)

    def forward(self, image):
        features = self.stem(image)
        guess = self.quick(features.flatten(1))
        if F.softmax(guess, dim=1).max() > 0.3:
            return guess
        return self.head(self.deep(features))


def _images(count: int) -> list[torch.Tensor]:
    return [torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(s)) * (1 + s % 4)
            for s in range(count)]


@pytest.fixture(scope="module")
def chosen(tmp_path_factory):
    """The model compiled routed (a chain of graphs), every graph on a pool, with the timing's answer
    forced to spin; the graphs the compile asked about."""
    asked = []

    def spinning(graphs, threads=None):
        asked.extend(graphs)
        return True

    patch = pytest.MonkeyPatch()
    patch.setattr(dycl.compiler, "spinning_pays", spinning)
    try:
        model = ConfidentCNN().eval()
        images = _images(40)
        compiled = dycl.compile(model, images[0], per_sample=True, progress=False,
                                optimize=Levers(predicate=False, small_graphs_on_caller=False))
    finally:
        patch.undo()
    return model, compiled, images, compiled.save(tmp_path_factory.mktemp("spin") / "net"), asked


def test_every_graph_is_timed_at_a_group_of_32_and_the_answer_is_in_the_manifest(chosen):
    *_, artifact, asked = chosen
    entries = json.loads((artifact / "manifest.json").read_text())["sub_dnns"]
    assert len(asked) == len({entry["file"] for entry in entries.values()}) >= 2
    for data, example, _ in asked:
        feeds = spin_choice.group_feeds(data, example)
        assert feeds and all(array.shape[0] == spin_choice.GROUP_ROWS for array in feeds.values())
    assert all(entry.get("spin") is True for entry in entries.values())
    for loaded in (chosen[1], dycl.load(artifact)):
        sessions = [executable.session for executable in loaded._host._call.values()]
        assert len(sessions) >= 2 and all(
            session.get_session_options().get_session_config_entry("session.force_spinning_stop") == "1"
            for session in sessions)


def test_a_spinning_batch_equals_eager_per_sample_in_process_and_as_host(chosen):
    model, compiled, images, artifact, _ = chosen
    paths = paths_of(model, images)
    assert assert_per_sample(model, compiled, [images[i] for i in diverse(paths, 16)], min_paths=2, atol=ATOL) == 2
    assert assert_per_sample(model, dycl.load(artifact), images, min_paths=2, atol=ATOL) == 2
    report = saved_host_report(artifact, model, images, images[3], atol=ATOL)
    assert report == {"checked": 2, "problems": [], "torch_loaded": False}


def test_spinning_is_chosen_only_past_the_margin(monkeypatch):
    graph = _graph()
    for sleeping, spinning, expected in [(1.0, 0.5, True), (1.0, 0.9, False), (1.0, 1.5, False)]:
        monkeypatch.setattr(spin_choice, "_time_chains", lambda fed, times=(sleeping, spinning): times)
        assert spin_choice.spinning_pays([graph], threads=2) is expected
    assert spin_choice.spinning_pays([graph], threads=1) is False  # no pool to spin
    assert spin_choice.spinning_pays([(graph[0], {}, False)], threads=2) is False  # no graph it can feed
    assert spin_choice.spinning_pays([(*graph[:2], True)], threads=2) is False  # on the calling thread: no pool


def test_the_real_timing_gives_an_answer_and_whole_call_models_are_not_timed(monkeypatch):
    assert spin_choice.spinning_pays([_graph()], threads=2) in (True, False)
    monkeypatch.setattr(dycl.compiler, "spinning_pays", _refused)
    model = ConfidentCNN().eval()
    images = _images(40)
    compiled = dycl.compile(model, images[0], progress=False)
    assert len(set(paths_of(model, images))) == 2
    with torch.no_grad():
        assert all(torch.allclose(compiled(image), model(image), atol=ATOL) for image in images)


def test_spinning_stops_when_a_run_returns():
    data, example, _ = _graph()
    options = ort_runtime.session_options_for(ort_runtime.runtime_options(threads=2), spin=True)
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    feeds = spin_choice.group_feeds(data, example)
    cpu = []
    for _ in range(4):
        session.run(None, feeds)
        start = time.process_time()
        time.sleep(0.05)
        cpu.append(time.process_time() - start)
    # a pool left spinning burns most of the 50 ms (measured 32-44 ms without force_spinning_stop)
    assert min(cpu) < 0.01, cpu


def _refused(graphs, threads=None):
    raise AssertionError("a whole-call model's pools are not timed for spinning")


def _graph() -> tuple[bytes, dict[str, np.ndarray], bool]:
    """A grouped-looking graph: a convolution over ``[samples, 1, 8, 16, 16]``, one sample's example."""
    import io

    class Grouped(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(8, 8, 3, padding=1)

        def forward(self, x):
            return self.conv(x.flatten(0, 1))

    buffer = io.BytesIO()
    torch.onnx.export(Grouped(), torch.randn(2, 1, 8, 16, 16), buffer, dynamo=False, input_names=["x"],
                      dynamic_axes={"x": {0: "samples"}})
    return buffer.getvalue(), {"x": np.random.default_rng(0).standard_normal((1, 8, 16, 16), dtype=np.float32)}, False


def test_the_thread_choice_is_made_at_a_group_of_32(monkeypatch, tmp_path):
    real, seen = dycl.compiler.on_calling_thread, []

    def recorded(data, example, threads=None, settled=None):
        answer = real(data, example, threads, settled)
        seen.append(({name: np.shape(value) for name, value in example.items()}, answer))
        return answer

    monkeypatch.setattr(dycl.compiler, "on_calling_thread", recorded)
    model = ConfidentCNN().eval()
    images = _images(40)
    compiled = dycl.compile(model, images[0], per_sample=True, progress=False, optimize=Levers(predicate=False))
    assert len(seen) >= 2 and all(shape[0] == spin_choice.GROUP_ROWS for shapes, _ in seen for shape in shapes.values())
    entries = json.loads((compiled.save(tmp_path / "net") / "manifest.json").read_text())["sub_dnns"]
    assert sorted(entry.get("threads") == 1 for entry in entries.values()) == sorted(answer for _, answer in seen)
    assert assert_per_sample(model, compiled, images, min_paths=2, atol=ATOL) == 2
    report = saved_host_report(tmp_path / "net", model, images, images[3], atol=ATOL)
    assert report == {"checked": 2, "problems": [], "torch_loaded": False}
