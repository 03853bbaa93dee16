"""Sessions specialized to input sizes (``ort_runtime._SpecializingExecutable``) on compiled models:
over three or more sizes, each called more than once so that specialized sessions run, the compiled
model equals eager on two or more paths in process, loaded from its saved artifact (the saved
``host.py``'s own runtime), and through the torch-free host; with the switch off, no session is
specialized; the single-graph lowering's one session is specialized too."""

from __future__ import annotations

import pytest
import torch
from dycl.hcfg.levers import Levers
from torch import nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch

ATOL = 1e-4


class ConfidentExitCNN(nn.Module):
    """A small CNN that answers from an early head when the whole batch is confident."""

    def __init__(self, threshold: float = 0.45) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2))
        self.exit_head = nn.Linear(8, 4)
        self.deeper = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.classifier = nn.Linear(16, 4)
        self.threshold = threshold

    def forward(self, images):
        feats = self.features(images)
        early = self.exit_head(feats.mean(dim=(2, 3)))
        if early.softmax(-1).max(-1).values.min() > self.threshold:
            return early
        return self.classifier(self.deeper(feats))


class TokenTagger(nn.Module):
    """Tags every token; a refining block runs only when the activations are large."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(40, 16)
        self.mix = nn.Conv1d(16, 16, 3, padding=1)
        self.refine = nn.Sequential(nn.LayerNorm(16), nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16))
        self.out = nn.Linear(16, 5)

    def forward(self, tokens):
        h = self.embed(tokens)
        h = torch.relu(self.mix(h.transpose(1, 2))).transpose(1, 2)
        if h.mean() > 0.2:
            h = h + self.refine(h)
        return self.out(h)


def _images() -> list[torch.Tensor]:
    """Batches of 1, 3 and 6 images, calm and sharp (the paths), each size seen many times."""
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(batch, 3, 8, 8, generator=generator) * scale
            for _ in range(3) for batch in (1, 3, 6) for scale in (0.2, 6.0)]


def _tokens() -> list[torch.Tensor]:
    """(batch, length) of (1, 5), (2, 7) and (4, 3), low and high token ids (the paths), each size seen often."""
    generator = torch.Generator().manual_seed(1)
    return [torch.randint(low, low + 20, (batch, length), generator=generator)
            for _ in range(3) for batch, length in ((1, 5), (2, 7), (4, 3)) for low in (0, 20)]


def _specialized_sizes(compiled: dycl.CompiledModel) -> set[tuple]:
    """The sizes specialized sessions were made for, over every executable of the model."""
    sizes = set()
    for variants in compiled._host._variants.values():
        for executable in variants.values():
            for inner in [link[2] for link in executable.chain] if hasattr(executable, "chain") else [executable]:
                sizes |= set(getattr(inner, "specialized", {}))
    return sizes


CASES = {"cnn early exit": (ConfidentExitCNN, _images, None),
         "tagger, batch and length": (TokenTagger, _tokens, {"tokens": {0: "batch", 1: "seq"}})}


@pytest.mark.parametrize("case", sorted(CASES))
def test_equal_to_eager_on_specialized_sessions(case, tmp_path):
    build, inputs, dynamic = CASES[case]
    torch.manual_seed(0)
    model, xs = build().eval(), inputs()
    compiled = dycl.compile(model, xs[0], **({} if dynamic is None else {"dynamic": dynamic}))
    assert assert_equivalent(model, compiled, xs, min_paths=2, atol=ATOL) == 2
    assert len({key[0] for key in _specialized_sizes(compiled)}) >= 3  # every size ran on its own session
    loaded = dycl.load(compiled.save(tmp_path / "net"))  # the saved host.py's runtime
    assert assert_equivalent(model, loaded, xs, min_paths=2, atol=ATOL) == 2
    assert len({key[0] for key in _specialized_sizes(loaded)}) >= 3
    report = run_host_without_torch(tmp_path / "net", model, xs, ATOL)
    assert report["checked"] == len(xs) and report["problems"] == []


def test_the_switch_keeps_every_call_on_the_symbolic_sessions(tmp_path, monkeypatch):
    torch.manual_seed(0)
    model, xs = ConfidentExitCNN().eval(), _images()
    artifact = dycl.compile(model, xs[0]).save(tmp_path / "net")
    loaded = dycl.load(artifact, specialize=False)
    assert assert_equivalent(model, loaded, xs, min_paths=2, atol=ATOL) == 2
    assert _specialized_sizes(loaded) == set()
    monkeypatch.setenv("DYCL_ORT_SPECIALIZE", "off")
    by_env = dycl.load(artifact)
    assert assert_equivalent(model, by_env, xs, min_paths=2, atol=ATOL) == 2
    assert _specialized_sizes(by_env) == set()
    report = run_host_without_torch(artifact, model, xs, ATOL, env={"DYCL_ORT_SPECIALIZE": "off"})
    assert report["checked"] == len(xs) and report["problems"] == []


def test_the_single_graph_session_is_specialized(tmp_path):
    torch.manual_seed(0)
    model, xs = ConfidentExitCNN().eval(), _images()
    compiled = dycl.compile(model, xs[0], optimize=Levers(single_graph="on"))
    assert compiled.stats["single_graph"]["chosen"] == "single_graph", compiled.stats["single_graph"]
    assert assert_equivalent(model, compiled, xs, min_paths=2, atol=ATOL) == 2
    assert len({key[0] for key in _specialized_sizes(compiled)}) >= 3
    report = run_host_without_torch(compiled.save(tmp_path / "net"), model, xs, ATOL)
    assert report["checked"] == len(xs) and report["problems"] == []


def test_a_per_sample_model_keeps_its_symbolic_sessions(tmp_path):
    """A batch's groups change size from call to call: a per-sample model specializes no session (unless
    asked), even where the same batches recur."""
    from dycl.per_sample.testing import assert_per_sample

    torch.manual_seed(0)
    model = ConfidentExitCNN().eval()
    generator = torch.Generator().manual_seed(2)
    samples = [torch.randn(1, 3, 8, 8, generator=generator) * scale for scale in (0.2, 6.0, 0.2, 6.0, 6.0)]
    compiled = dycl.compile(model, samples[0], per_sample=True)
    loaded = dycl.load(compiled.save(tmp_path / "net"))
    for candidate in (compiled, loaded):
        for _ in range(3):
            assert assert_per_sample(model, candidate, samples, min_paths=2, atol=ATOL) == 2
        assert _specialized_sizes(candidate) == set()
    asked = dycl.load(tmp_path / "net", specialize=True)
    for _ in range(3):
        assert assert_per_sample(model, asked, samples, min_paths=2, atol=ATOL) == 2
    assert _specialized_sizes(asked)
