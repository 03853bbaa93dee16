"""Module state written in forward() compiles (issue 27, first item): the state is an input and
an output of the compiled model; the in-process model reads it from the user's module and writes
it back after every call, the saved host keeps it between calls. Each test calls eager and
compiled in sequence, from twins made with ``copy.deepcopy`` before compiling, and compares every
output and the whole module state after every call."""

from __future__ import annotations

import copy
import inspect

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dycl
from dycl.harness.paths import model_source_files, record_path
from dycl.harness.testing import outputs_match
from dycl.harness.testing_host import run_host_without_torch
from dycl.in_process.staleness import StaleWeightsError

ATOL = 1e-5


# -- models, written as people write them --------------------------------------------------------


class WarmupGate(nn.Module):
    """A step counter buffer (like BatchNorm's num_batches_tracked) that switches the path."""

    def __init__(self, warmup=3):
        super().__init__()
        self.warmup = warmup
        self.proj = nn.Linear(6, 6)
        self.register_buffer("num_calls", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.num_calls += 1
        h = self.proj(x)
        if self.num_calls <= self.warmup:
            return h.detach() * 0.5
        if h.mean() > 0:
            return F.relu(h)
        return torch.tanh(h) - 1


class EMANormalizer(nn.Module):
    """Running statistics updated in place through an alias, read back to normalise."""

    def __init__(self, dim=5, momentum=0.8):
        super().__init__()
        self.momentum = momentum
        self.register_buffer("running_mean", torch.zeros(dim))
        self.register_buffer("running_var", torch.ones(dim))

    def forward(self, x):
        mean = x.mean(dim=0)
        var = x.var(dim=0, unbiased=False)
        rm = self.running_mean
        rm.mul_(self.momentum).add_(mean, alpha=1 - self.momentum)
        self.running_var.mul_(self.momentum).add_((1 - self.momentum) * var)
        z = (x - self.running_mean) / torch.sqrt(self.running_var + 1e-5)
        if z.abs().max() > 2.5:
            z = z.clamp(-2.5, 2.5)
        return z


class StreamingSmoother(nn.Module):
    """A streaming cache: the last frames of the previous chunk are kept on the module
    (rebinding a registered buffer) and a fresh stream starts when it is all zeros."""

    def __init__(self, channels=3, context=2):
        super().__init__()
        self.context = context
        self.conv = nn.Conv1d(channels, channels, kernel_size=context + 1)
        self.register_buffer("tail", torch.zeros(1, channels, context))

    def forward(self, chunk):
        if self.tail.abs().sum() == 0:
            padded = F.pad(chunk, (self.context, 0), mode="replicate")
        else:
            padded = torch.cat([self.tail, chunk], dim=2)
        self.tail = chunk[:, :, -self.context:].detach().clone()
        return self.conv(padded)


class PeriodicRefresh(nn.Module):
    """Plain Python attributes: an int counter that decides a branch and a float that accumulates."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.steps = 0
        self.refresh_every = 3
        self.seen = 0.0
        self.ready = False

    def forward(self, x):
        self.steps += 1
        self.seen = self.seen + 0.5
        if self.steps % self.refresh_every == 0:
            self.ready = True
            return self.fc(x) * self.seen
        if self.ready:
            return self.fc(x) - 1.0
        return x


class Tracker(nn.Module):
    """A submodule without control flow that counts what it sees."""

    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(4))
        self.register_buffer("count", torch.zeros(()))

    def forward(self, h):
        self.total += h.sum(0)
        self.count.add_(h.shape[0])
        return h


class TrackedClassifier(nn.Module):
    """State written in a submodule and in a helper method, only on one branch."""

    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.tracker = Tracker()
        self.register_buffer("last_logits", torch.zeros(2, 4))

    def _remember(self, logits):
        self.last_logits.copy_(logits)

    def forward(self, x):
        h = self.body(x)
        if h.sum() > 0:
            h = self.tracker(h)
            self._remember(h)
        return h + self.tracker.total / (self.tracker.count + 1)


class Reader(nn.Module):
    """No control flow: called as a graph of its own unless it reads state written elsewhere."""

    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.ones(4))

    def forward(self, x):
        return x * self.scale


class ScaledByReader(nn.Module):
    """The parent writes the submodule's buffer; the submodule reads it."""

    def __init__(self):
        super().__init__()
        self.reader = Reader()

    def forward(self, x):
        self.reader.scale.mul_(1.5)
        y = self.reader(x)
        if y.sum() > 0:
            return y
        return -y


class DepthStepper(nn.Module):
    """Configuration set in __init__ stays static (the loop unrolls); a counter that forward
    returns, and a reset() the user calls between calls."""

    def __init__(self, depth=3):
        super().__init__()
        self.depth = depth
        self.blocks = nn.ModuleList(nn.Linear(4, 4) for _ in range(depth + 2))
        self.steps = 0

    def reset(self):
        self.steps = 0

    def forward(self, x):
        self.steps += 1
        for i in range(self.depth):
            x = torch.relu(self.blocks[i](x))
        if self.steps > 2:
            x = x + self.blocks[-1](x)
        return x, self.steps


class OutCounter(nn.Module):
    """A helper counting with ``out=`` next to a call through a ModuleList index, and the count
    read back with ``.item()`` to decide (found by the fuzzer: the call by index crashed)."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Sigmoid(), nn.Tanh()])
        self.register_buffer("count", torch.zeros(1))

    def _helper(self, x, k):
        x = self.layers[k % 2](x)
        torch.add(self.count, 1, out=self.count)
        return x

    def forward(self, x):
        x = self._helper(x, 3)
        if self.count.item() > 3:
            x = x * 2
        return x


class ActivationLog(nn.Module):
    """A list on self that forward() appends to (a different number of items per path), a tensor
    per call, never read in forward()."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.log = []

    def forward(self, x):
        h = self.fc(x)
        if h.mean() > 0:
            self.log.append(h.detach().mean(0))
            return h
        self.log.append(h.min().detach())
        self.log.append(h.max().detach())
        return -h


class ReadsItsLog(nn.Module):
    def __init__(self):
        super().__init__()
        self.log = []

    def forward(self, x):
        self.log.append(x.sum())
        if torch.stack(self.log).sum() > 2:  # MARK: all items, a graph over a list that grows
            return x * 2
        return x


class ModeSwitch(nn.Module):
    """One helper reads a mode flag, another (called after it) flips it on data: the read must
    not be folded to the flag's value at compile time although the rewrite sees it first."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.mode = 0

    def _apply(self, x):
        if self.mode == 1:
            return self.fc(x) * 2
        return self.fc(x)

    def _maybe_switch(self, x):
        if x.mean() > 0:
            self.mode = 1 - self.mode

    def forward(self, x):
        y = self._apply(x)
        self._maybe_switch(x)
        return y


class RoutingStats(nn.Module):
    """A dict of counters on self, updated by item (also through a local name) on every path."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.stats = {"calls": 0, "early": 0, "mean": 0.0}

    def forward(self, x):
        self.stats["calls"] += 1
        h = self.fc(x)
        if h.mean() > 0:
            self.stats["early"] += 1
            return h
        s = self.stats
        s["mean"] = s["mean"] * 0.5 + float(h.mean())
        return h * s["calls"]


class AliasedCounterThenLayer(nn.Module):
    """A counter bumped through a local alias of the dict, read back through ``self`` by the
    tensor code after it (found by the fuzzer: the tensor statement was merged into the sub-DNN
    before the bump, and saw the old count)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.stats = {"calls": 0}

    def forward(self, x):
        h = self.fc(x)
        s = self.stats
        s["calls"] = s["calls"] + 3
        h = h + self.stats["calls"] * 0.01
        if h.mean() > 0.05:
            return h.relu()
        return h


class PositiveCounter(nn.Module):
    """A buffer counts the calls with a positive sum: ``int(...)`` nested in the in-place update,
    a statement with no assignment (the fuzzer's ``self.count.add_(int(x.sum() > 0))``; the int
    used to be traced inside the graph and refused)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("positives", torch.zeros(1))

    def forward(self, x):
        h = self.fc(x)
        self.positives.add_(int(h.sum() > 0))
        if self.positives.item() > 2:
            return h * 2
        return h


class RingBuffer(nn.Module):
    """A ring buffer of the last inputs' means, written by index from a Python counter."""

    def __init__(self, size=3):
        super().__init__()
        self.size = size
        self.register_buffer("ring", torch.zeros(size, 4))
        self.pos = 0

    def forward(self, x):
        self.ring[self.pos % self.size] = x.mean(0)
        self.pos += 1
        avg = self.ring.mean(0)
        if avg.sum() > 0:
            return x - avg
        return x + avg


# -- the sequence check ---------------------------------------------------------------------------


def _module_state(model: nn.Module) -> dict:
    """Every tensor and every plain attribute of every module."""
    return {
        "tensors": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "attributes": {f"{name}.{k}": copy.deepcopy(v) for name, m in model.named_modules()
                       for k, v in vars(m).items()
                       if isinstance(v, (bool, int, float, dict)) and not k.startswith("_")},
    }


def _assert_same_state(expected: nn.Module, actual: nn.Module, where: str) -> None:
    want, got = _module_state(expected), _module_state(actual)
    problem = outputs_match(want["tensors"], got["tensors"], ATOL)
    assert problem is None, f"{where}: module state differs: {problem}"
    problem = outputs_match(want["attributes"], got["attributes"], ATOL)
    assert problem is None, f"{where}: attributes differ: {problem}"


def run_sequence(model: nn.Module, twin: nn.Module, compiled, inputs: list, eager_steps: frozenset = frozenset()):
    """Call ``compiled`` (of ``model``; ``model`` itself at ``eager_steps``) and the eager ``twin``
    on ``inputs`` in order; every output and the state after every call must agree. Returns the
    number of distinct eager paths."""
    files = model_source_files(twin)
    paths = set()
    for step, x in enumerate(inputs):
        with torch.no_grad():
            expected, path = record_path(twin, x, files=files)
            actual = model(x) if step in eager_steps else compiled(x)
        paths.add(path)
        problem = outputs_match(expected, actual, ATOL)
        assert problem is None, f"call #{step}: {problem}"
        _assert_same_state(twin, model, f"after call #{step}")
    return len(paths)


def _compile(model_class, example, **options):
    torch.manual_seed(0)
    model = model_class().eval()
    twin = copy.deepcopy(model)
    compiled = dycl.compile(model, example, **options)
    _assert_same_state(twin, model, "after compiling")  # compiling changed nothing
    return model, twin, compiled


def _rows(seed: int, count: int, shape: tuple, scales=(0.3, -1.0, 2.0, -3.0)) -> list:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator) * scales[i % len(scales)] + scales[i % len(scales)]
            for i in range(count)]


# -- tests ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["onnxruntime", "torch"])
def test_counter_buffer_decides_the_path(backend):
    model, twin, compiled = _compile(WarmupGate, torch.randn(2, 6), backend=backend)
    paths = run_sequence(model, twin, compiled, _rows(1, 10, (2, 6)))
    assert paths == 3  # warm-up, relu, tanh
    assert model.num_calls.item() == 10


def test_running_statistics_interleaved_with_eager_calls():
    model, twin, compiled = _compile(EMANormalizer, torch.randn(8, 5))
    inputs = _rows(2, 12, (8, 5), scales=(0.2, 1.0, 6.0, -4.0))
    # eager calls of the same model in between: compiled continues from the state eager left
    paths = run_sequence(model, twin, compiled, inputs, eager_steps=frozenset({2, 3, 7}))
    assert paths == 2  # clamped or not
    assert not torch.equal(model.running_mean, torch.zeros(5))


def test_streaming_cache_rebinds_a_buffer():
    model, twin, compiled = _compile(StreamingSmoother, torch.randn(1, 3, 6))
    chunks = _rows(3, 6, (1, 3, 6))
    paths = run_sequence(model, twin, compiled, chunks, eager_steps=frozenset({4}))
    assert paths == 2  # the fresh stream, then the cached one
    model.tail.zero_()  # the user resets the stream: a new one starts, in eager and compiled alike
    twin.tail.zero_()
    assert run_sequence(model, twin, compiled, chunks[:3]) == 2


def test_python_attribute_counter_decides_the_branch():
    model, twin, compiled = _compile(PeriodicRefresh, torch.randn(2, 4))
    paths = run_sequence(model, twin, compiled, _rows(4, 9, (2, 4)), eager_steps=frozenset({4}))
    assert paths == 3  # before ready, refresh, after ready
    assert (model.steps, model.seen, model.ready) == (9, 4.5, True)
    assert "state_steps" in compiled.host_source  # a host-side counter: no sub-DNN computes it


def test_state_in_a_submodule_and_a_helper_on_one_branch():
    model, twin, compiled = _compile(TrackedClassifier, torch.randn(2, 4))
    inputs = _rows(5, 10, (2, 4), scales=(1.0, -1.0, 2.0, -2.0))
    paths = run_sequence(model, twin, compiled, inputs, eager_steps=frozenset({5}))
    assert paths == 2
    assert model.tracker.count.item() > 0 and model.tracker.count.item() < 20  # only one branch counts


@pytest.mark.parametrize("model_class, shape", [(WarmupGate, (2, 6)), (EMANormalizer, (8, 5)),
                                                (PeriodicRefresh, (2, 4)), (TrackedClassifier, (2, 4)),
                                                (RoutingStats, (2, 4)), (AliasedCounterThenLayer, (2, 4)),
                                                (PositiveCounter, (2, 4))],
                         ids=["counter", "ema", "attributes", "submodule", "dict", "aliased-dict", "int-in-update"])
def test_saved_host_keeps_the_state_between_calls(tmp_path, model_class, shape):
    model, twin, compiled = _compile(model_class, torch.randn(*shape))
    compiled.save(tmp_path / "artifact")
    inputs = _rows(6, 8, shape)
    # dycl.load: the host starts from the state at compile time and keeps it per loaded model
    loaded, fresh = dycl.load(tmp_path / "artifact"), copy.deepcopy(twin)
    files, paths = model_source_files(fresh), set()
    for step, x in enumerate(inputs):
        with torch.no_grad():
            expected, path = record_path(fresh, x, files=files)
        paths.add(path)
        problem = outputs_match(expected, loaded(x), ATOL)
        assert problem is None, f"call #{step}: {problem}"
    assert len(paths) >= 2
    again = dycl.load(tmp_path / "artifact")  # another loaded model starts again from the stored state
    with torch.no_grad():
        assert outputs_match(copy.deepcopy(twin)(inputs[0]), again(inputs[0]), ATOL) is None
    # the torch-free host, one process calling in sequence
    report = run_host_without_torch(tmp_path / "artifact", copy.deepcopy(twin), inputs, ATOL)
    assert report["checked"] == len(inputs) and not report["problems"], report
    _assert_same_state(twin, model, "the saved host does not touch the model")


@pytest.mark.parametrize("backend", ["onnxruntime", "torch"])
def test_a_write_through_an_alias_is_seen_by_the_tensor_code_after_it(backend):
    model, twin, compiled = _compile(AliasedCounterThenLayer, torch.randn(2, 4), backend=backend)
    paths = run_sequence(model, twin, compiled, _rows(7, 10, (2, 4)), eager_steps=frozenset({3}))
    assert paths == 2  # relu or not
    assert model.stats["calls"] == 30


@pytest.mark.parametrize("backend", ["onnxruntime", "torch"])
def test_an_int_inside_an_in_place_update_is_computed_per_call(backend):
    model, twin, compiled = _compile(PositiveCounter, torch.randn(2, 4), backend=backend)
    paths = run_sequence(model, twin, compiled, _rows(8, 10, (2, 4)), eager_steps=frozenset({4}))
    assert paths == 2
    assert 2 < model.positives.item() < 10  # some calls counted, not all


def test_changed_weights_are_still_stale_but_state_is_not():
    model, twin, compiled = _compile(WarmupGate, torch.randn(2, 6))
    with torch.no_grad():
        model(torch.randn(2, 6))  # writes num_calls: the compiled model's input, not a stale weight
    compiled(torch.randn(2, 6))
    with torch.no_grad():
        model.proj.weight.mul_(2)
    with pytest.raises(StaleWeightsError, match="proj.weight"):
        compiled(torch.randn(2, 6))


def test_state_read_inside_a_submodule_call():
    model, twin, compiled = _compile(ScaledByReader, torch.randn(2, 4))
    assert run_sequence(model, twin, compiled, _rows(7, 6, (2, 4), scales=(1.0, -1.0))) == 2
    assert torch.allclose(model.reader.scale, torch.full((4,), 1.5 ** 6))


def test_counter_returned_with_config_static_and_reset_between_calls():
    model, twin, compiled = _compile(DepthStepper, torch.randn(2, 4))
    assert "for " not in compiled._result.rewritten.source  # range(self.depth) unrolled: depth is static
    inputs = _rows(8, 5, (2, 4))
    assert run_sequence(model, twin, compiled, inputs) == 2
    model.reset()
    twin.reset()
    assert run_sequence(model, twin, compiled, inputs[:3]) == 2
    assert compiled(inputs[0])[1] == 4 == model.steps


def test_out_counter_in_a_helper_read_with_item():
    model, twin, compiled = _compile(OutCounter, torch.randn(1, 8))
    assert run_sequence(model, twin, compiled, _rows(9, 6, (1, 8))) == 2
    assert model.count.item() == 6


def _same_items(expected: list, actual: list) -> bool:
    return len(expected) == len(actual) and all(
        outputs_match(a, torch.as_tensor(b), ATOL) is None for a, b in zip(expected, actual))


def test_list_appended_to_on_self(tmp_path):
    torch.manual_seed(0)
    model = ActivationLog().eval()
    model.log.append(torch.ones(4))  # already holding an item when compiled: the saved host starts with it
    twin = copy.deepcopy(model)
    compiled = dycl.compile(model, torch.randn(2, 4))
    _assert_same_state(twin, model, "after compiling")
    assert _same_items(twin.log, model.log)
    compiled.save(tmp_path / "artifact")
    inputs = _rows(10, 8, (2, 4), scales=(1.0, -1.0, 2.0, -2.0))
    fresh = copy.deepcopy(twin)
    assert run_sequence(model, twin, compiled, inputs, eager_steps=frozenset({3})) == 2
    assert _same_items(twin.log, model.log) and len(model.log) > len(inputs)
    loaded = dycl.load(tmp_path / "artifact")
    for step, x in enumerate(inputs):
        with torch.no_grad():
            assert outputs_match(fresh(x), loaded(x), ATOL) is None, f"call #{step}"
    assert _same_items(fresh.log, loaded._host.state[compiled._result.rewritten.state[0].parameter])
    report = run_host_without_torch(tmp_path / "artifact", copy.deepcopy(twin), inputs, ATOL)
    assert report["checked"] == len(inputs) and not report["problems"], report


def test_list_read_in_forward_is_refused_at_its_line():
    model = ReadsItsLog().eval()
    with pytest.raises(dycl.UnsupportedError, match="a read of the list log on the model") as info:
        dycl.compile(model, torch.randn(2, 4))
    lines, first = inspect.getsourcelines(ReadsItsLog.forward)
    assert info.value.location.line == first + next(i for i, text in enumerate(lines) if "MARK" in text)
    assert model.log == []


def test_flag_read_before_the_helper_that_writes_it():
    model, twin, compiled = _compile(ModeSwitch, torch.randn(2, 4))
    inputs = _rows(11, 8, (2, 4), scales=(1.0, 1.0, -1.0, 2.0))
    assert run_sequence(model, twin, compiled, inputs) == 4  # both modes, switching or not


def test_per_sample_with_module_state_is_refused():
    model = WarmupGate().eval()
    before = copy.deepcopy(model)
    with pytest.raises(dycl.UnsupportedError, match=r"per_sample=True with module state written in forward\(\) "
                                                     r"\(num_calls\)"):
        dycl.compile(model, torch.randn(1, 6), per_sample=True)
    _assert_same_state(before, model, "after the refusal")


def test_dict_of_counters_on_self():
    model, twin, compiled = _compile(RoutingStats, torch.randn(2, 4))
    stats = model.stats
    paths = run_sequence(model, twin, compiled, _rows(12, 9, (2, 4), scales=(1.0, -1.0, 2.0)),
                         eager_steps=frozenset({4}))
    assert paths == 2
    assert model.stats is stats and model.stats["calls"] == 9 and 0 < model.stats["early"] < 9


def test_ring_buffer_written_by_index(tmp_path):
    model, twin, compiled = _compile(RingBuffer, torch.randn(2, 4))
    inputs = _rows(13, 8, (2, 4), scales=(1.0, 1.0, -2.0, -1.0))
    fresh = copy.deepcopy(twin)
    assert run_sequence(model, twin, compiled, inputs, eager_steps=frozenset({2})) == 2
    assert model.pos == 8
    compiled.save(tmp_path / "ring")
    report = run_host_without_torch(tmp_path / "ring", fresh, inputs, ATOL)  # from the state at compile time
    assert report["checked"] == len(inputs) and not report["problems"], report
