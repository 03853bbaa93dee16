"""The per-sample router's gather (``hostgen/host_router.py``): a group's argument at
one position is ``np.stack`` of its members' values, built without a copy where the
values are proven rows of one array. Checked directly against ``np.stack`` (views of
one array in order, permuted, a subset, two arrays, and views that only look like rows),
and end to end on a model whose groups take each of those forms, against per-sample
eager and bit for bit against the same host with the fast path off."""

from __future__ import annotations

import collections

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from dycl.hostgen import host_router
from dycl.hostgen.copies import copied
from torch import nn

import dycl
from dycl.harness.testing import outputs_match
from dycl.harness.testing_host import run_host_without_torch
from dycl.per_sample.testing import PerSampleEager, assert_per_sample, batch_of, diverse, paths_of

ATOL = 1e-5
pytestmark = pytest.mark.filterwarnings("ignore")


class GatedResidualMLP(nn.Module):
    """Confident samples leave early; a probe sends the others through a deep block,
    whose result is dropped for the shortcut when it grows too large; the head reads
    the refined features beside the shortcut kept on the side."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(7)
        self.stem = nn.Linear(6, 16)
        self.exit = nn.Linear(16, 3)
        self.probe = nn.Linear(16, 1)
        self.deep = nn.Sequential(nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 16))
        self.head = nn.Linear(32, 3)

    def forward(self, x):
        h = torch.tanh(self.stem(x))
        logits = self.exit(h)
        if logits.softmax(-1).max() > 0.42:
            return logits, 0
        shortcut = h
        steps = 0
        if self.probe(h).item() > 0:
            h = self.deep(h)
            steps += 1
            if h.norm() > 1.06:
                h = shortcut  # the host rebinds the argument to the row the stem gave
        out = self.head(torch.cat([h, shortcut], dim=-1))
        return out, steps


def _router(fast_row_bytes: int = 0) -> dict:
    """The router's functions as a host holds them, with rows of ``fast_row_bytes`` or more proven views."""
    namespace: dict = {}
    exec(compile(copied(host_router.__file__), "host_router", "exec"), namespace)  # noqa: S102 - our own module
    namespace["FAST_ROW_BYTES"] = fast_row_bytes
    return namespace


def _check(gather, values, view_of=None):
    expected = np.stack(values)
    got = gather(values)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    assert np.shares_memory(got, view_of) if view_of is not None else not any(
        np.shares_memory(got, value) for value in values)


def test_gather_is_np_stack_and_copies_only_what_it_must():
    gather = _router()["_gather"]
    rng = np.random.default_rng(0)
    out, other = rng.normal(size=(5, 1, 4)).astype(np.float32), rng.normal(size=(5, 1, 4)).astype(np.float32)
    _check(gather, list(out), view_of=out)  # a sub-DNN's rows passed on whole: the output itself
    _check(gather, [out[1], out[2], out[3]], view_of=out)  # consecutive: a slice
    _check(gather, [out[2], out[0], out[1]])  # permuted
    _check(gather, [out[0], out[2], out[4]])  # a subset
    _check(gather, [out[1], out[1]])  # a row twice
    _check(gather, [out[0], other[1], out[2]])  # two outputs
    batch = rng.normal(size=(4, 3))
    _check(gather, [batch[i:i + 1] for i in range(4)], view_of=batch)  # the batch, as the router slices it
    _check(gather, [out[4], out[3]][::-1], view_of=out)
    reversed_out = out[::-1]  # rows of a view: proven against its owner
    _check(gather, [reversed_out[0], reversed_out[1]])
    # views that share the owner and the shape but are not its rows
    square = rng.normal(size=(3, 4, 4))
    _check(gather, [square[0], square[1].T])
    owner = rng.normal(size=(8, 4))
    _check(gather, [owner.reshape(-1)[2:6], owner.reshape(-1)[6:10]])  # straddling two rows
    _check(gather, [owner.view(np.int64)[0], owner.view(np.int64)[1]])  # another dtype
    _check(gather, list(rng.normal(size=5).astype(np.float32)))  # numpy scalars
    _check(gather, [1.5, 2.5])  # Python values


def test_gather_matches_np_stack_on_random_views():
    rng, gather = np.random.default_rng(1), _router()["_gather"]
    for trial in range(300):
        owners = [rng.normal(size=(6, 2, 3)).astype(np.float32) for _ in range(2)]
        pool = [owner[row] for owner in owners for row in range(6)]
        pool += [owners[0][::-1][row] for row in range(6)] + [owners[1][:, ::-1][row] for row in range(6)]
        values = [pool[i] for i in rng.integers(0, len(pool), size=int(rng.integers(1, 8)))]
        if trial % 3 == 0:  # often one owner's rows, in order
            start = int(rng.integers(0, 5))
            values = list(owners[0][start:start + int(rng.integers(1, 6 - start + 1))])
        got, expected = gather(values), np.stack(values)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)


def _samples(count: int) -> list[torch.Tensor]:
    return [2.0 * torch.randn(1, 6, generator=torch.Generator().manual_seed(seed)) for seed in range(count)]


@pytest.fixture(scope="module")
def gated():
    model = GatedResidualMLP().eval()
    samples = _samples(64)
    return model, dycl.compile(model, samples[0], per_sample=True, progress=False), samples


def _form(values) -> str:
    """How a group's values at one position relate to the arrays they are views of
    (worked out here from addresses, independently of the router)."""
    bases = {id(value.base) for value in values if isinstance(value, np.ndarray) and value.base is not None}
    if len(bases) != 1 or not all(isinstance(value, np.ndarray) for value in values):
        return "not rows of one array"
    base = values[0].base
    origin = base.__array_interface__["data"][0]
    rows = [(value.__array_interface__["data"][0] - origin) // base.strides[0] for value in values]
    if rows == list(range(rows[0], rows[0] + len(rows))):
        return "in order"
    return "a subset" if rows == sorted(set(rows)) else "permuted"


def _recorded(compiled, monkeypatch, fast_row_bytes: int):
    """Route through the host, one generator per sample, with the fast path from ``fast_row_bytes`` a row on, recording
    the form of every gather's values (and whether it came back a view of their array), and
    each group's gathered arguments."""
    host_globals = type(compiled._host).route.__globals__
    monkeypatch.setitem(host_globals, "FAST_ROW_BYTES", fast_row_bytes)
    monkeypatch.setitem(host_globals, "GROUP_WHEN", -1.0)  # per sample (groups gather nothing)
    forms, arguments = collections.Counter(), []
    gather, gather_all = host_globals["_gather"], host_globals["_arguments"]

    def recording_gather(values):
        gathered = gather(values)
        form = _form(values)
        assert np.shares_memory(gathered, values[0]) == (form == "in order"), form
        forms[form] += 1
        return gathered

    def recording_arguments(members, width):
        gathered = gather_all(members, width)
        arguments.append(gathered)
        return gathered

    monkeypatch.setitem(host_globals, "_gather", recording_gather)
    monkeypatch.setitem(host_globals, "_arguments", recording_arguments)
    return forms, arguments


def _bitwise(a, b) -> bool:
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_bitwise(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    return type(a) is type(b) and a == b


def test_groups_of_every_form_equal_eager_per_sample(gated, monkeypatch):
    model, compiled, samples = gated
    chosen = [samples[i] for i in diverse(paths_of(model, samples), 16)]
    batch = batch_of(chosen)[0].numpy()
    slow = compiled._host(batch)  # rows are small: np.array everywhere
    forms, _ = _recorded(compiled, monkeypatch, fast_row_bytes=0)
    assert assert_per_sample(model, compiled, chosen, min_paths=4, atol=ATOL) == 4
    # the batch into the stem, the survivors into the probe and the deep block, the shortcut
    # of samples that come to the head by two ways, and the head's features from two sub-DNNs
    assert set(forms) == {"in order", "a subset", "permuted", "not rows of one array"}, forms
    assert _bitwise(compiled._host(batch), slow)
    assert collections.Counter(_way(model, x) for x in chosen).keys() == {"exit", "shallow", "deep", "rebound"}
    steps = compiled(batch_of(chosen)[0])[1]
    assert len(set(steps)) == 2 and sum(steps) > 0


def _way(model: GatedResidualMLP, x: torch.Tensor) -> str:
    """Which way ``x`` goes through ``model`` (its forward, step by step)."""
    with torch.no_grad():
        h = torch.tanh(model.stem(x))
        if model.exit(h).softmax(-1).max() > 0.42:
            return "exit"
        if model.probe(h).item() <= 0:
            return "shallow"
        return "rebound" if model.deep(h).norm() > 1.06 else "deep"


def test_a_position_that_repeats_another_is_gathered_once(gated, monkeypatch):
    model, compiled, samples = gated
    shallow = [x for x in samples if _way(model, x) == "shallow"]
    assert len(shallow) >= 8
    forms, arguments = _recorded(compiled, monkeypatch, fast_row_bytes=0)
    assert assert_per_sample(model, compiled, shallow[:8], atol=ATOL) == 1
    head = arguments[-1]  # (h, shortcut): the same rows in every sample
    assert len(arguments) == 3 and len(head) == 2 and head[0] is head[1]
    assert forms == {"in order": 3}  # the batch, the stem's rows into the probe, and into the head once


def test_the_saved_host_routes_the_same_without_torch(gated, tmp_path):
    model, compiled, samples = gated
    artifact = compiled.save(tmp_path / "gated")
    chosen = [samples[i] for i in diverse(paths_of(model, samples), 16)]
    batches = [batch_of(chosen)[0], batch_of(samples[:5])[0], samples[3]]
    report = run_host_without_torch(artifact, PerSampleEager(model), batches, atol=ATOL)
    assert report == {"checked": 3, "problems": [], "torch_loaded": False}
    assert outputs_match(PerSampleEager(model)(batches[0]), dycl.load(artifact)(batches[0]), ATOL) is None


class WideConvGate(nn.Module):
    """A conv stem on 64 KiB images, a second conv where the stem's mean is positive,
    and a pooled head: rows large enough for the gather's proof at its default size."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(8)
        self.stem = nn.Conv2d(16, 16, 3, padding=1)
        self.refine = nn.Conv2d(16, 16, 3, padding=1)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        h = F.relu(self.stem(x))
        if h.mean() > 0.232:
            h = h + torch.tanh(self.refine(h))
        return self.head(F.adaptive_avg_pool2d(h, 1).flatten(1))


def test_rows_of_64_kib_take_the_proof_by_default(monkeypatch, tmp_path):
    model = WideConvGate().eval()
    samples = [torch.randn(1, 16, 32, 32, generator=torch.Generator().manual_seed(seed)) for seed in range(12)]
    compiled = dycl.compile(model, samples[0], per_sample=True, progress=False)
    host_globals = type(compiled._host).route.__globals__
    assert samples[0].numel() * 4 == host_globals["FAST_ROW_BYTES"] == 1 << 16
    forms, _ = _recorded(compiled, monkeypatch, fast_row_bytes=host_globals["FAST_ROW_BYTES"])
    assert assert_per_sample(model, compiled, samples, min_paths=2, atol=ATOL) == 2
    assert forms == {"in order": 1, "a subset": 1, "not rows of one array": 1}, forms  # only the batch is not copied
    artifact = compiled.save(tmp_path / "wide")
    report = run_host_without_torch(artifact, PerSampleEager(model), [batch_of(samples)[0]], atol=ATOL)
    assert report == {"checked": 1, "problems": [], "torch_loaded": False}


class _MixedArgumentsHost:
    """Sub-DNN 1 is asked with a row of 3 float32 values (first value above 0), of 2 (below 0),
    of 3 float64 values (0) or a Python number (of any other row): a group's arguments must
    still have one shape and dtype, so its members split by them."""

    _call = {0: lambda x: (2 * x,), 1: lambda h: (h.sum(axis=-1, keepdims=True) + h.shape[-1],)}

    def _sample(self, x):
        h, = (yield (0, (), (x,)))
        first = h[0, 0]
        if np.isnan(first):
            argument = 1.5
        elif first > 0:
            argument = h
        elif first < 0:
            argument = h[:, :2]
        else:
            argument = h.astype(np.float64)
        y, = (yield (1, (), (argument,)))
        return y


def _alone(argument):
    """What sub-DNN 1 gives one sample whose argument is ``argument`` (a group of one)."""
    return _MixedArgumentsHost._call[1](np.expand_dims(argument, 0))[0][0]


def test_a_group_whose_arguments_differ_in_shape_or_dtype_splits_by_them():
    namespace = _router()
    namespace.update(ORDER={0: 0, 1: 1}, SAMPLE_INPUTS=["x"], STRAIGHT=None, GROUPED=False,
                     SIZED_BY_VALUES=frozenset())
    x = np.array([[1, 2, 3], [-1, 0, 1], [0, 5, 5], [2, 2, 2], [np.nan, 0, 0], [-3, 1, 1]], np.float32)
    record = []
    outputs = namespace["_route"](_MixedArgumentsHost(), {"x": x}, record)
    assert record[0] == (0, 6) and sorted(size for index, size in record[1:]) == [1, 1, 2, 2]  # four groups
    expected = [_alone(2 * x[0:1]), _alone(2 * x[1:2, :2]), _alone((2 * x[2:3]).astype(np.float64)),
                _alone(2 * x[3:4]), _alone(1.5), _alone(2 * x[5:6, :2])]
    assert isinstance(outputs, list) and len(outputs) == 6  # rows of other shapes and dtypes: one per sample
    for got, want in zip(outputs, expected):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    alike = [np.zeros((1, 3), np.float32), np.ones((1, 3), np.float32)]
    assert namespace["_alike"](alike) and namespace["_alike"]([np.float32(1), np.array(2, np.float32)])
    assert not namespace["_alike"]([*alike, np.zeros((1, 3))]) and not namespace["_alike"]([*alike, np.zeros((1, 2))])


@pytest.mark.parametrize(("shape", "dtype"), [((32, 1, 10), np.float32), ((3, 1), np.int64), ((1, 1, 2, 2), np.bool_)])
def test_a_straight_programs_output_is_its_joined_rows_without_a_copy(shape, dtype):
    output = (np.arange(np.prod(shape)) % 7).astype(dtype).reshape(shape)
    joined = host_router._joined_rows(output)
    expected = host_router._join(list(output))
    assert joined.shape == expected.shape == shape[:1] + shape[2:] and joined.dtype == expected.dtype
    assert np.array_equal(joined, expected) and joined.flags.c_contiguous
    assert np.shares_memory(joined, output)  # the rows are not split and copied again


@pytest.mark.parametrize("shape", [(4,), (4, 2, 3), (0, 1, 3)])
def test_rows_that_join_otherwise_take_the_join(shape):
    output = np.ones(shape, np.float32)
    if shape[0] == 0:  # no sample: the join has no row to read, as before
        with pytest.raises(IndexError):
            host_router._joined_rows(output)
        return
    joined, expected = host_router._joined_rows(output), host_router._join(list(output))
    assert type(joined) is type(expected) and len(joined) == len(expected)
    assert all(np.array_equal(a, b) for a, b in zip(joined, expected))
