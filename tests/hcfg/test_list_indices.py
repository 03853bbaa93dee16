"""A Python list of ints made from the data indexing a tensor (``h[keep]``), as detection and token-
pruning code writes it (``keep = [i for i in range(n) if float(scores[i]) > threshold]``): the
compiled part that indexes with it takes it as one 1-d int64 tensor of a symbolic length
(``hcfg.list_indices``), so it agrees with eager on inputs that keep different numbers of rows,
none included (``h[[]]``), also where the kept rows flow on into a later branch, in process and in
the torch-free host, and in per-sample batches mixing samples that keep different numbers of rows.
A list the compiled part also reads otherwise is refused at the user's line; the boolean mask the
hint names compiles too."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import dycl
from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host
from dycl.harness.testing_host import run_host_without_torch
from dycl.per_sample.testing import assert_per_sample, saved_host_report

pytestmark = pytest.mark.filterwarnings("ignore")


class KeepPositive(nn.Module):
    """Keep the rows whose first feature is positive (a list comprehension over the data)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 3)
        self.out = nn.Linear(3, 2)

    def kept(self, x) -> int:
        return int((self.proj(x)[:, 0] > 0).sum())

    def forward(self, x):
        h = self.proj(x)
        keep = [i for i, v in enumerate(h[:, 0].tolist()) if v > 0]
        h = h[keep] if keep else h
        return self.out(h)


class ScoreThreshold(nn.Module):
    """Boxes whose score passes a threshold, as post-processing keeps detections; the kept rows
    decide a branch after (so a later compiled part takes them at every length, none included)."""

    def __init__(self) -> None:
        super().__init__()
        self.score = nn.Linear(4, 1)
        self.head = nn.Linear(4, 2)
        self.score_thresh = 0.2

    def kept(self, boxes) -> int:
        return int((self.score(boxes).squeeze(-1) > self.score_thresh).sum())

    def forward(self, boxes):
        scores = self.score(boxes).squeeze(-1)
        threshold = self.score_thresh
        keep = [i for i in range(scores.shape[0]) if float(scores[i]) > threshold]
        detections = boxes[keep]
        if float(detections.sum()) > 0:
            return self.head(detections), scores[keep]
        return self.head(-detections), scores[keep]


class TokenPruning(nn.Module):
    """One sample's tokens ``(1, tokens, dim)``: the ones a scorer keeps, pooled (per_sample=True)."""

    def __init__(self) -> None:
        super().__init__()
        self.score = nn.Linear(4, 1)
        self.head = nn.Linear(4, 3)

    def kept(self, x) -> int:
        return int((self.score(x[0]).squeeze(-1) > 0).sum())

    def forward(self, x):
        tokens = x[0]
        scores = self.score(tokens).squeeze(-1)
        keep = [i for i in range(tokens.shape[0]) if float(scores[i]) > 0]
        return self.head(tokens[keep]).sum(0, keepdim=True)


class KeepAndCount(KeepPositive):
    def forward(self, x):
        h = self.proj(x)
        keep = [i for i, v in enumerate(h[:, 0].tolist()) if v > 0]
        return self.out(h[keep]) * torch.tensor(keep).unsqueeze(1)


class KeepPositiveMask(KeepPositive):
    """The same with a boolean mask (the refusal's hint)."""

    def forward(self, x):
        h = self.proj(x)
        keep = h[:, 0] > 0
        if keep.any():
            h = h[keep]
        return self.out(h)


def _inputs(count: int, rows: int = 5) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(11)
    return [torch.randn(rows, 4, generator=g) * (1 + i % 3) - (i % 4 == 0) * 2 for i in range(count)]


def _model(cls: type[nn.Module]) -> nn.Module:
    torch.manual_seed(5)
    return cls().eval()


@pytest.mark.parametrize("cls, min_paths", [(KeepPositive, 1), (ScoreThreshold, 2)],
                         ids=["comprehension over tolist", "score threshold, a branch after"])
def test_a_list_of_ints_as_an_index_agrees_with_eager_at_every_length(cls, min_paths, tmp_path):
    model, inputs = _model(cls), _inputs(32)
    with torch.no_grad():
        lengths = {model.kept(x) for x in inputs}
    assert len(lengths) >= 4 and 0 in lengths  # several lengths, and the empty list (KeepPositive: one line)
    assert assert_agrees_in_process_and_as_host(model, inputs, tmp_path, 1e-5, min_paths=min_paths) >= min_paths


def test_per_sample_batches_of_samples_keeping_different_numbers_of_tokens(tmp_path):
    model = _model(TokenPruning)
    samples = [x.unsqueeze(0) for x in _inputs(32)]
    with torch.no_grad():
        lengths = {model.kept(x) for x in samples[:16]}
    assert len(lengths) >= 4 and 0 in lengths
    compiled = dycl.compile(model, samples[0], per_sample=True, progress=False)
    assert assert_per_sample(model, compiled, samples[:16], atol=1e-5) == 1  # (the lengths are the paths here)
    report = saved_host_report(compiled.save(tmp_path / "tokens"), model, samples, samples[1], atol=1e-5)
    assert report == {"checked": 2, "problems": [], "torch_loaded": False}


def test_a_list_of_ints_also_read_otherwise_is_refused_at_the_users_line():
    with pytest.raises(dycl.UnsupportedError) as refused:
        dycl.compile(_model(KeepAndCount), _inputs(2)[1], progress=False)
    message = str(refused.value)
    assert "list of ints" in message and "'keep'" in message
    assert f"{__file__.rsplit('/', 1)[-1]}:" in message and "boolean mask" in message


def test_the_hinted_tensor_index_agrees_with_eager(tmp_path):
    model, inputs = _model(KeepPositiveMask), _inputs(24)
    compiled = dycl.compile(model, inputs[0], progress=False)
    with torch.no_grad():
        kept = {int((model.proj(x)[:, 0] > 0).sum()) for x in inputs}
        for x in inputs:
            assert torch.allclose(compiled(x), model(x), atol=1e-5)
    assert len(kept) >= 3 and 0 in kept  # several widths, and both paths (some keep no row)
    report = run_host_without_torch(compiled.save(tmp_path / "keep"), model, inputs[:12], atol=1e-5)
    assert report == {"checked": 12, "problems": [], "torch_loaded": False}
