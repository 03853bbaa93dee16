"""Group execution of the per-sample host (``hostgen/host_groups.py``, ``hostgen/groupable.py``):
``_sample`` runs once per group of samples with the same decisions, and every sample's outputs
still equal eager run on that sample alone.

Checked end to end on models written as people write them (a greedy decoder that stops at an
end token, a stack of gated residual blocks, a model that returns an ``.item()`` value and so
stays per sample), with the router forced into each mode (``GROUP_WHEN``), on batches of one
path, of every path, of one sample, with paths interleaved, in process and through the saved
torch-free host; and directly on a host built by hand, against the per-sample semantics
written out in Python.

Measured (the router's CPU ms of one batched call, groups against per sample on the same host,
calls alternating; 2-core x86_64, 2026-11-28): groups pay where a batch has few paths a sample
(caption_resnext at batch 32, 0.29 paths a sample: 1.6 -> 1.0-1.2 ms; translation 0.40: 2.3 -> 2.0;
RANet 0.19: 1.15 -> 0.79) and cost where most samples split off on their own (skipnet_ff 0.77:
3.3 -> 5.3; blockdrop 1.0: 6.4 -> 14.4; each split replays ``_sample`` up to the split), with the
crossover near 0.6 (caption_resnext at batch 8, 0.62: 0.61 against 0.59): hence ``GROUP_WHEN = 0.5``.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from dycl.hcfg.levers import Levers
from dycl.hostgen import host_groups, host_router
from dycl.hostgen.copies import copied
from dycl.hostgen.groupable import groupable
from torch import nn

import dycl
from dycl.harness.testing import outputs_match
from dycl.harness.testing_host import run_host_without_torch
from dycl.per_sample.testing import PerSampleEager, assert_per_sample, batch_of, diverse, one_path, paths_of

ATOL = 1e-5
pytestmark = pytest.mark.filterwarnings("ignore")


@pytest.fixture(autouse=True)
def untraced():
    """No tracer (a coverage run's): under one the router runs per sample, one frame per sample."""
    previous = sys.gettrace()
    sys.settrace(None)
    yield
    sys.settrace(previous)


class GreedyDecoder(nn.Module):
    """Encode, then feed the decoder its own argmax until it says the end token (0)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(11)
        self.encode = nn.Linear(6, 12)
        self.embed = nn.Embedding(5, 12)
        self.cell = nn.GRUCell(12, 12)
        self.out = nn.Linear(12, 5)

    def forward(self, x):
        h = torch.tanh(self.encode(x))
        word = self.out(h).argmax(-1)
        words = [word]
        for _ in range(3):
            if word.item() == 0:
                break
            h = self.cell(self.embed(word), h)
            word = self.out(h).argmax(-1)
            words.append(word)
        return self.out(h), len(words)


class GatedStack(nn.Module):
    """Residual blocks, each run only where its gate opens."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(12)
        self.stem = nn.Linear(8, 16)
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(16, 16), nn.ReLU()) for _ in range(3)])
        self.gates = nn.ModuleList([nn.Linear(16, 1) for _ in range(3)])
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        x = F.relu(self.stem(x))
        for block, gate in zip(self.blocks, self.gates):
            if torch.sigmoid(gate(x)).item() > 0.5:
                x = x + block(x)
        return self.head(x)


class ConfidenceOut(nn.Module):
    """Returns its confidence as a Python float: a host value each sample has its own of."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(13)
        self.body = nn.Linear(4, 8)
        self.probe = nn.Linear(8, 1)
        self.left, self.right = nn.Linear(8, 2), nn.Linear(8, 2)

    def forward(self, x):
        h = torch.relu(self.body(x))
        confidence = torch.sigmoid(self.probe(h)).item()
        if confidence > 0.5:
            return self.left(h), confidence
        return self.right(h), confidence


def _samples(features: int, count: int, scale: float) -> list[torch.Tensor]:
    return [scale * torch.randn(1, features, generator=torch.Generator().manual_seed(100 + seed))
            for seed in range(count)]


def _host_globals(compiled) -> dict:
    return type(compiled._host).route.__globals__


@pytest.fixture(scope="module", params=["decoder", "stack"])
def grouped(request):
    model, features, scale = (GreedyDecoder(), 6, 2.0) if request.param == "decoder" else (GatedStack(), 8, 1.5)
    model.eval()
    samples = _samples(features, 48, scale)
    compiled = dycl.compile(model, samples[0], per_sample=True, progress=False, optimize=Levers(predicate=False))
    return model, compiled, samples, paths_of(model, samples)


def _batches(paths) -> dict[str, list[int]]:
    """Batches (indices into the samples) of each form the router must get right."""
    every = diverse(paths, len(set(paths)))[:len(set(paths))]  # one sample per path
    interleaved = [i for pair in zip(every, reversed(every)) for i in pair][:12]
    return {"mixed": list(range(20)), "one path": one_path(paths, 9), "every path": every,
            "interleaved": interleaved, "one sample": [5]}


@pytest.mark.parametrize("group_when", [1.0, -1.0], ids=["groups", "per sample"])
def test_batches_of_every_form_equal_eager_per_sample(grouped, group_when, monkeypatch):
    model, compiled, samples, paths = grouped
    monkeypatch.setitem(_host_globals(compiled), "GROUP_WHEN", group_when)
    assert _host_globals(compiled)["GROUPED"] is True
    counted = {}
    for form, indices in _batches(paths).items():
        chosen = [samples[i] for i in indices]
        counted[form] = assert_per_sample(model, compiled, chosen, atol=ATOL, paths=[paths[i] for i in indices])
    assert counted["mixed"] >= 3 and counted["every path"] == len(set(paths)) >= 3
    assert counted["one path"] == counted["one sample"] == 1
    assert counted["interleaved"] >= 3


def test_each_group_is_one_path_and_runs_the_same_sub_dnns(grouped, monkeypatch):
    model, compiled, samples, paths = grouped
    host_globals = _host_globals(compiled)
    batch = batch_of(samples[:24])[0].numpy()
    runs = {}
    monkeypatch.setitem(host_globals, "COUNT_PATHS_EVERY", 1)
    for group_when in (1.0, -1.0):
        monkeypatch.setitem(host_globals, "GROUP_WHEN", group_when)
        outputs, record = compiled._host.route(batch)
        runs[group_when] = sorted(record)
        # both modes count the batch's paths: groups, or distinct trails of requests
        assert round(compiled._host._paths_a_sample * 24) == len(set(paths[:24])) >= 3
    assert runs[1.0] == runs[-1.0]  # the same sub-DNN runs on the same groups of rows
    assert outputs_match(PerSampleEager(model)(batch_of(samples[:24])[0]), compiled(batch_of(samples[:24])[0]),
                         ATOL) is None


def test_the_router_picks_groups_by_the_last_batch(grouped):
    model, compiled, samples, paths = grouped
    host = compiled._host
    calls = []
    original = type(host)._sample

    def counting(self, *args, **kwargs):
        calls.append(1)
        return original(self, *args, **kwargs)

    type(host)._sample = counting
    try:
        few = one_path(paths, 16)
        host._paths_a_sample = 0.0
        host(batch_of([samples[i] for i in few])[0].numpy())
        assert len(calls) == 1  # one group, one run of _sample for 16 samples
        many = diverse(paths, len(set(paths)))[:len(set(paths))] * 2
        host._paths_a_sample = 1.0  # the last batch had a path a sample: per sample
        calls.clear()
        host(batch_of([samples[i] for i in many])[0].numpy())
        assert len(calls) == len(many)
        # per sample, the router counts paths every COUNT_PATHS_EVERY calls: by then, one path, groups again
        every = _host_globals(compiled)["COUNT_PATHS_EVERY"]
        assert every > 1
        starts, host._routed = [], 0
        for _ in range(every + 1):
            calls.clear()
            host(batch_of([samples[i] for i in few])[0].numpy())
            starts.append(len(calls))
        assert starts == [len(few)] * every + [1]
    finally:
        type(host)._sample = original
        host._paths_a_sample = 0.0


def test_under_a_tracer_the_router_runs_each_sample(grouped):
    model, compiled, samples, paths = grouped
    host, calls = compiled._host, []
    original = type(host)._sample
    type(host)._sample = lambda self, *args, **kwargs: calls.append(1) or original(self, *args, **kwargs)
    chosen = [samples[i] for i in one_path(paths, 8)]
    try:
        host._paths_a_sample = 0.0
        sys.settrace(lambda frame, event, arg: None)  # a debugger's or coverage's: it must see each sample
        try:
            traced = compiled(batch_of(chosen)[0])
        finally:
            sys.settrace(None)
        assert len(calls) == len(chosen)
        assert outputs_match(PerSampleEager(model)(batch_of(chosen)[0]), traced, ATOL) is None
        calls.clear()
        compiled(batch_of(chosen)[0])
        assert len(calls) == 1  # untraced: one group
    finally:
        type(host)._sample = original


def test_the_saved_host_runs_groups_without_torch(grouped, tmp_path):
    model, compiled, samples, paths = grouped
    artifact = compiled.save(tmp_path / "grouped")
    chosen = [samples[i] for i in diverse(paths, 16)]
    batches = [batch_of(chosen)[0], batch_of([samples[i] for i in one_path(paths, 6)])[0], samples[2]]
    report = run_host_without_torch(artifact, PerSampleEager(model), batches, atol=ATOL)
    assert report == {"checked": 3, "problems": [], "torch_loaded": False}
    loaded = dycl.load(artifact)
    assert outputs_match(PerSampleEager(model)(batches[0]), loaded(batches[0]), ATOL) is None
    assert len(set(paths_of(model, chosen))) >= 3


def test_a_host_value_each_sample_has_its_own_stays_per_sample():
    model = ConfidenceOut().eval()
    samples = _samples(4, 24, 2.0)
    compiled = dycl.compile(model, samples[0], per_sample=True, progress=False, optimize=Levers(predicate=False))
    assert _host_globals(compiled)["GROUPED"] is False
    assert assert_per_sample(model, compiled, samples, min_paths=2, atol=ATOL) == 2
    confidences = compiled(batch_of(samples)[0])[1]
    assert len(set(confidences)) == len(samples)


# -- the router on a host built by hand -------------------------------------------------------------


def _router_namespace() -> dict:
    """``hostgen/host_groups.py`` and ``hostgen/host_router.py`` as a host holds them."""
    namespace: dict = {}
    for module in (host_groups, host_router):
        exec(compile(copied(module.__file__), module.__name__, "exec"), namespace)  # noqa: S102 - our own modules
    namespace.update(ORDER={0: 0, 1: 1, 2: 2}, SAMPLE_INPUTS=["x"], STRAIGHT=None, GROUPED=True,
                     SIZED_BY_VALUES=frozenset())
    return namespace


class _HandHost:
    """Sub-DNN 0 doubles a row and sums it, 1 adds one, 2 negates; every row is (1, 3)."""

    _call = {0: lambda x: (2 * x, x.sum(axis=-1)), 1: lambda h: (h + 1,), 2: lambda h: (-h,)}

    def _sample(self, x):
        h, s = (yield (0, (), (x,)))
        kept = [h]
        if s.item() > 0 and not s.item() > 3:
            h, = (yield (1, (), (h,)))
            kept.append(h)
        elif -s.item() * 2 >= 4 or s.item() == 0:
            h, = (yield (2, (), (h,)))
        return h, kept, len(kept)


def _by_hand(row: np.ndarray):
    """What ``_HandHost._sample`` gives one sample (its row of the batch), written out, and
    the decisions its tests take on the way (the truth of each operand ``and``/``or``/``not`` reads)."""
    h, s = 2 * row, float(row.sum())
    kept, decisions = [h], [s > 0]
    if s > 0:
        decisions.append(s > 3)
    if 0 < s <= 3:
        h = h + 1
        kept.append(h)
    else:
        decisions.append(-s * 2 >= 4)
        if not -s * 2 >= 4:
            decisions.append(s == 0)
        if -s * 2 >= 4 or s == 0:
            h = -h
    return (h, kept, len(kept)), tuple(decisions)


@pytest.mark.parametrize("group_when", [1.0, -1.0], ids=["groups", "per sample"])
def test_the_router_on_a_hand_built_host(group_when):
    namespace = _router_namespace()
    namespace.update(GROUP_WHEN=group_when, COUNT_PATHS_EVERY=1)
    rng = np.random.default_rng(3)
    seen = set()
    for trial in range(40):
        count = int(rng.integers(2, 12))
        x = rng.choice([-2.0, -1.0, 0.0, 0.5, 1.0, 2.0], size=(count, 3)).astype(np.float32)
        host, record = _HandHost(), []
        outputs = namespace["_route"](host, {"x": x}, record)
        expected, decisions = zip(*[_by_hand(x[i:i + 1]) for i in range(count)])
        for i, (h, kept, length) in enumerate(expected):
            np.testing.assert_array_equal(outputs[0][i:i + 1], h)
            assert outputs[2][i] == length and len(outputs[1][i]) == length
            for got, want in zip(outputs[1][i], kept):
                np.testing.assert_array_equal(got, want)
        paths = len(set(decisions))
        seen.add(paths)
        assert record[0] == (0, count)  # sub-DNN 0 once, on the whole batch
        groups = round(host._paths_a_sample * count)  # groups, or (per sample) distinct trails of requests
        assert groups == paths if group_when > 0 else 1 <= groups <= paths
    assert max(seen) >= 4


def test_rows_and_items_follow_the_group_as_it_splits():
    namespace = _router_namespace()
    group = namespace["_Group"](np.arange(4))
    rows = namespace["Rows"](np.arange(8.0).reshape(4, 1, 2)[:, :, :1], np.arange(4), group)
    items = rows.item()
    assert items.values == [0.0, 2.0, 4.0, 6.0]
    assert bool(items * 2 - 1 > 5) is False  # members 0, 1 decide False; 2, 3 leave as a group
    assert group.members.tolist() == [0, 1] and [m.tolist() for m in group.spawned] == [[2, 3]]
    assert rows.current().ravel().tolist() == [0.0, 2.0] and (10 - items).now() == [10.0, 8.0]
    assert bool(-items <= -2.0) is False and group.members.tolist() == [0]
    flags = namespace["Rows"](np.array([[True], [False], [True]]), np.arange(3), namespace["_Group"](np.arange(3)))
    assert bool(flags) is True and flags.group.members.tolist() == [0, 2]
    with pytest.raises(TypeError, match="may only be moved"):
        flags == 1  # noqa: B015 - a comparison of rows is refused, never an identity test


# -- what the emitter proves ------------------------------------------------------------------------


@pytest.mark.parametrize(("body", "expected"), [
    (["h, s = (yield (0, (), (x,)))", "if s.item() > 0 and not s.item() == 2:", "    pass", "return h, s"], True),
    (["h, = (yield (0, (), (x,)))", "hs = [h]", "hs.append(h)", "y, = (yield (1, (len(hs),), (*hs,)))",
      "return y, hs"], True),
    (["h, = (yield (0, (), (x,)))", "n = h.item()", "return h, n"], False),  # a per-sample host value
    (["h, = (yield (0, (), (x,)))", "if h.item() is None:", "    pass", "return h"], False),
    (["h, = (yield (0, (), (x,)))", "print(h)", "return h"], False),  # any other call
    (["h, = (yield (0, (), (x,)))", "self.last = h", "return h"], False),  # an effect outside _sample
    (["h, = (yield (0, (), (x,)))", "hs = self.history", "hs.append(h)", "return h"], False),
    (["h, = (yield (0, (), (x,)))", "for i in range(2):", "    pass", "return h"], False),
    (["h, = (yield (0, (), (x,)))", "if h:", "    pass", "return h[0]"], False),
    (["h, = (yield (0, (), (x,)))", "g = h", "return g.shape"], False),
    (["h, t = (yield (0, (), (x,)))", "if t or not t:", "    return h", "return t"], True),  # a tensor's truth
    (["h, t = (yield (0, (), (x,)))", "if t == 1:", "    return h", "return t"], False),
    (["h, t = (yield (0, (), (x,)))", "if (t and h.item()) > 1:", "    return h", "return t"], False),
    (["h, = (yield (0, (), (x,)))", "hs = [h]", "kept = hs", "kept.append(h)", "return kept"], True),
    (["h, = (yield (0, (), (x,)))", "hs = [h]", "kept = hs", "kept = self.kept", "return kept"], False),
])
def test_what_groupable_accepts(body, expected):
    assert groupable(body, ["x"]) is expected
