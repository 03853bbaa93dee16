"""``dycl.backends.single_graph_choice``: the one graph on the calling thread is replaced only by a
clearly faster form (in a pool, or the host), timed by blocks that each start with an untimed call,
by lower quartiles of runs over the example and its derived inputs; and ``auto``
end to end on a decoder that stops early: whatever it keeps agrees with eager on every path, in process and
through the torch-free host."""

from __future__ import annotations

import time

import pytest
import torch
from dycl.hcfg.levers import Levers

import dycl
from dycl.artifact import host_module
from dycl.backends import single_graph_choice, single_graph_stage
from dycl.backends.single_graph_choice import MARGIN, choose, pick, timing_inputs
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch
from tests.backends.test_single_graph_tails import GreedyDecoder


class _Takes:
    """A candidate that takes ``seconds`` per call (busy, so that a slow wake-up cannot shorten it)
    and raises on inputs whose first value is negative, where ``strict``."""

    def __init__(self, seconds: float, strict: bool = False) -> None:
        self.seconds, self.strict, self.calls = seconds, strict, 0

    def __call__(self, value: float) -> float:
        if self.strict and value < 0:
            raise ValueError("outside the domain")
        self.calls += 1
        end = time.perf_counter() + self.seconds
        while time.perf_counter() < end:
            pass
        return value


def test_a_less_preferred_form_replaces_the_preferred_one_only_past_the_margin():
    inputs, preference = [(1.0,), (2.0,), (3.0,)], single_graph_stage.PREFERENCE
    assert preference == (1, 2, 0)  # the one graph on the calling thread, in a pool, then the host
    pool = choose([_Takes(0.002), _Takes(0.003), _Takes(0.001)], inputs, preference)
    assert pool.kept == 2 and pool.us[2] < pool.us[1] * (1 - MARGIN), pool
    assert pool.rounds >= 5 and pool.inputs == 3
    assert pool.stats()["ratio"] < 0.7
    alike = choose([_Takes(0.001), _Takes(0.001), _Takes(0.001)], inputs, preference)
    assert alike.kept == 1, alike  # within the margin the one graph on the calling thread stays
    host = choose([_Takes(0.001), _Takes(0.002), _Takes(0.003)], inputs, preference)
    # which of the two slower ones is "fastest other" is left to the sleeps' overshoot on a loaded machine
    assert host.kept == 0 and host.fastest_other in (1, 2), host
    assert choose([_Takes(0.001), _Takes(0.001)], inputs).kept == 0  # without a preference: the first


def test_pick_walks_the_preference_and_needs_the_margin_to_move():
    assert pick((100.0, 99.0, 98.0), (1, 2, 0)) == 1
    assert pick((100.0, 99.0, 90.0), (1, 2, 0)) == 2
    assert pick((80.0, 99.0, 90.0), (1, 2, 0)) == 0
    assert pick((80.0, 99.0, 90.0)) == 0 and pick((100.0, 90.0)) == 1 and pick((100.0, 98.0)) == 0
    with pytest.raises(ValueError, match="every candidate once"):
        pick((1.0, 2.0), (1, 1))


class _Cold(_Takes):
    """A candidate whose first call after another candidate's takes ``cold`` seconds (caches
    holding the other's weights), its later calls ``seconds``."""

    last: list = [None]

    def __init__(self, seconds: float, cold: float) -> None:
        super().__init__(seconds)
        self.cold = cold

    def __call__(self, value: float) -> float:
        warm, _Cold.last[0] = _Cold.last[0] is self, self
        self.seconds, steady = (self.seconds if warm else self.cold), self.seconds
        try:
            return super().__call__(value)
        finally:
            self.seconds = steady


def test_each_block_starts_with_an_untimed_call():
    """A form slow only on the first call after another's block is timed at its steady cost: a
    serving loop calls one model back to back. In the middle of three candidates (the order
    reverses every other round) every one of its blocks follows another's: timed from each block's
    first call, it (5 ms once, then 1 ms) would cost (5 + 1 + 1) / 3 ms per input against 1.2."""
    first, cold, last = _Cold(0.0012, 0.0012), _Cold(0.001, 0.005), _Cold(0.0012, 0.0012)
    choice = choose([first, cold, last], [(1.0,), (2.0,), (3.0,)])
    assert choice.kept == 1 and choice.us[1] < 1150, choice


def test_inputs_a_candidate_refuses_are_not_timed_but_the_example_must_run():
    host, single = _Takes(0.0005), _Takes(0.0001, strict=True)
    choice = choose([host, single], [(1.0,), (-1.0,), (2.0,)])
    assert choice.inputs == 2 and choice.kept == 1
    with pytest.raises(ValueError, match="domain"):
        choose([_Takes(0.0), _Takes(0.0, strict=True)], [(-1.0,), (1.0,)])


def test_the_timing_inputs_are_the_example_and_its_derivations_at_its_sizes():
    example = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    found = timing_inputs((example,))
    assert len(found) >= 4 and all(args[0].shape == (2, 3) for args in found)
    assert (found[0][0] == example.numpy()).all()
    assert len({args[0].tobytes() for args in found}) == len(found)  # each derived input differs


def test_auto_keeps_a_form_that_agrees_with_eager_on_every_length(tmp_path, monkeypatch):
    monkeypatch.setattr(single_graph_choice, "TINY_MACS", 0)  # timed although tiny (as a bigger model is)
    torch.manual_seed(0)
    model = GreedyDecoder().eval()
    generator = torch.Generator().manual_seed(1)
    inputs = [torch.randn(1, 16, generator=generator) * 3 for _ in range(40)]
    with torch.no_grad():
        lengths = {model(x).shape[1] for x in inputs}
    assert len(lengths) >= 3, lengths
    compiled = dycl.compile(model, inputs[0], optimize=Levers(single_graph="auto"), dynamic=False)
    chosen = compiled.stats["single_graph"]
    assert chosen["timed_inputs"] >= 5 and chosen["host_us"] > 0 and chosen["single_graph_us"] > 0, chosen
    assert (len(compiled.manifest.sub_dnns) == 1) == (chosen["chosen"] == "single_graph"), chosen
    assert assert_equivalent(model, compiled, inputs, min_paths=len(lengths), atol=1e-5) == len(lengths)
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, inputs, 1e-5)
    assert report["checked"] == len(inputs) and report["problems"] == [], report


def test_auto_runs_the_host_it_timed_without_emitting_or_loading_it_again(tmp_path, monkeypatch):
    """The lower stage loads each candidate once; the kept one's loaded host (its sessions) is the
    compiled model, not a fresh load: a compile loads three hosts (the host form, the one graph on
    the calling thread and in a pool) and creates no session after the lower stage."""
    monkeypatch.setattr(single_graph_choice, "TINY_MACS", 0)  # timed although tiny (as a bigger model is)
    loads, timed = [], []
    load_host_module = host_module.load_host_module
    monkeypatch.setattr(host_module, "load_host_module", lambda *a, **k: loads.append(a) or load_host_module(*a, **k))
    choose_timed = single_graph_stage.choose

    def choose_and_keep(models, inputs, preference):
        timed.extend(models)
        return choose_timed(models, inputs, preference)

    monkeypatch.setattr(single_graph_stage, "choose", choose_and_keep)
    torch.manual_seed(0)
    model = GreedyDecoder().eval()
    generator = torch.Generator().manual_seed(2)
    inputs = [torch.randn(1, 16, generator=generator) * 3 for _ in range(40)]
    with torch.no_grad():
        lengths = {model(x).shape[1] for x in inputs}
    assert len(lengths) >= 3, lengths
    compiled = dycl.compile(model, inputs[0], optimize=Levers(single_graph="auto"), dynamic=False)
    assert len(timed) == 3 and len(loads) == 3, (len(timed), len(loads))
    assert any(compiled._host is candidate for candidate in timed)  # the timed model itself, sessions and all
    kept = compiled.stats["single_graph"]["chosen"]
    assert (compiled._host is timed[0]) == (kept == "host"), kept
    assert assert_equivalent(model, compiled, inputs, min_paths=len(lengths), atol=1e-5) == len(lengths)
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, inputs, 1e-5)
    assert report["checked"] == len(inputs) and report["problems"] == [], report
