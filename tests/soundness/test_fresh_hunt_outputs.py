"""Fresh hunt, family 5: outputs whose structure depends on the data (dicts with optional keys,
lists of varying length, ``None`` on some paths, an int from data) and state kept on ``self``
across calls (a per-call counter, a cache keyed by a size)."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn

import dycl
from dycl.harness.testing_host import run_host_without_torch
from tests.soundness.fresh_hunt import Case, at, check_case, seeded


def _randn(seed, shape, spread=4):
    def make():
        g = seeded(seed)
        return [torch.randn(*shape, generator=g) * (0.3 + i % spread) for i in range(50)]
    return make


class OptionalAuxDict(nn.Module):  # detection-style dict with an extra key when confident
    def __init__(self):
        super().__init__()
        self.cls = nn.Linear(4, 3)
        self.box = nn.Linear(4, 4)

    def forward(self, x):
        logits = self.cls(x)
        out = {"logits": logits}
        if logits.softmax(-1).max() > 0.6:
            out["boxes"] = self.box(x)
        return out


class VaryingList(nn.Module):  # one entry per block that fired
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(3, 3) for _ in range(3))

    def forward(self, x):
        feats = []
        for block in self.blocks:
            x = block(x)
            if x.mean() > 0:
                feats.append(x)
        return feats


class MaybeAttention(nn.Module):  # (output, None) or (output, weights), like output_attentions
    def forward(self, q, k):
        scores = q @ k.transpose(-1, -2)
        weights = scores.softmax(-1)
        out = weights @ k
        if scores.max() > 3:
            return out, weights
        return out, None


def _qk_inputs():
    g = seeded(501)
    return [(torch.randn(2, 3, generator=g) * (0.5 + i % 4), torch.randn(4, 3, generator=g)) for i in range(50)]


class TupleOrTensor(nn.Module):  # returns a tensor on one path, a tuple on the other
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x, x.abs().argmax()


class CountFromData(nn.Module):  # an int computed from data, returned next to the tensor
    def forward(self, x):
        n = int((x > 0).sum())
        if n > 2:
            return x.relu(), n
        return x, n


class CallCounter(nn.Module):  # counts calls on self and switches behaviour every other call
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls % 2 == 0:
            return x * 2
        if x.sum() > 0:
            return x + 1
        return x


class PositionCache(nn.Module):  # caches position ids per length (a common micro-optimisation)
    def __init__(self):
        super().__init__()
        self._cache = {}
        self.emb = nn.Embedding(16, 4)

    def forward(self, x):  # x: (n, 4)
        n = x.shape[0]
        if n not in self._cache:
            self._cache[n] = torch.arange(n)
        h = x + self.emb(self._cache[n])
        if h.mean() > 0:
            return h
        return -h


def _lengths_inputs():
    g = seeded(502)
    return [torch.randn(1 + i % 5, 4, generator=g) for i in range(50)]


class RunningStats(nn.Module):  # an EMA tracked on a plain attribute during inference
    def __init__(self):
        super().__init__()
        self.ema = None

    def forward(self, x):
        m = x.mean()
        self.ema = m if self.ema is None else 0.9 * self.ema + 0.1 * m
        if m > self.ema:
            return x - self.ema
        return x


class RepeatedOutputs(nn.Module):  # a list whose length is a count from the data
    def forward(self, x):
        n = int((x > 0).sum())
        return [x * i for i in range(n)]


class LabelsAsList(nn.Module):  # predictions handed back as Python ints and a float
    def forward(self, x):  # (b, 3)
        labels = x.argmax(-1).tolist()
        if x.max() > 1:
            return labels, x.max().item()
        return labels, 0.0


class KeysFromData(nn.Module):  # a dict key formatted from a predicted index
    def forward(self, x):
        i = int(x.argmax())
        return {f"exit{i}": x * 2, "all": x}


CASES = {
    "optional_aux_dict": Case(OptionalAuxDict, _randn(503, (1, 4)), 2),
    "varying_list": Case(VaryingList, _randn(504, (1, 3)), 4),
    "maybe_attention": Case(MaybeAttention, _qk_inputs, 2),
    "tuple_or_tensor": Case(TupleOrTensor, _randn(505, (3,)), 2),
    "count_from_data": Case(CountFromData, _randn(506, (4,)), 2),
    "repeated_outputs": Case(RepeatedOutputs, _randn(509, (4,)), 5),
    "labels_as_list": Case(LabelsAsList, _randn(510, (2, 3)), 2),
    "keys_from_data": Case(KeysFromData, _randn(511, (4,)), 2,
                           refused=at("an f-string", "return {f\"exit{i}\": x * 2, \"all\": x}")),
    "position_cache": Case(PositionCache, _lengths_inputs, 2,
                           refused=at(r"a read of the module dict `self\._cache` by a key it does not hold",
                                      "h = x + self.emb(self._cache[n])")),
    "running_stats": Case(RunningStats, _randn(507, (3,)), 2,
                          refused=at("write to module state", "self.ema = m if self.ema is None")),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_data_dependent_outputs(name, tmp_path):
    case = CASES[name]
    assert check_case(case, tmp_path) == case.paths


def test_call_counter_on_self_matches_eager_call_by_call(tmp_path):
    """A counter on ``self`` switches the path every other call: the compiled model and the saved
    host, each from a fresh copy, must follow eager's sequence, and compiling leaves it at 0."""
    torch.manual_seed(0)
    model = CallCounter().eval()
    reference, host_reference = copy.deepcopy(model), copy.deepcopy(model)
    inputs = _randn(508, (3,))()
    compiled = dycl.compile(model, inputs[0])
    assert model.calls == 0
    paths = set()
    for x in inputs:
        expected = reference(x.clone())
        paths.add("even call" if reference.calls % 2 == 0 else bool(x.sum() > 0))
        torch.testing.assert_close(compiled(x.clone()), expected)
    assert len(paths) == 3 and model.calls == reference.calls == len(inputs)
    report = run_host_without_torch(compiled.save(tmp_path / "art"), host_reference, inputs, 1e-6)
    assert report["checked"] == len(inputs) and not report["problems"], report["problems"][:3]
