"""The compiler as a list of stages (``dycl.compiler``) and the explore walk's reuse of
the build walk's concrete runs (``hcfg.observations``)."""

from __future__ import annotations

import libcst as cst
import torch
import torch.nn as nn
from dycl.hcfg.decisions import DecisionRecorder
from dycl.hcfg.observations import Observations

import dycl
from dycl.compiler import PHASES, STAGES
from dycl.harness.testing import assert_equivalent


class Gate(nn.Module):
    """Three paths, chosen by a tensor's value; one branch updates ``h`` in place (``+=``),
    so a result the explore walk reuses from the build walk must not be the updated one."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.up = nn.Linear(6, 6)
        self.down = nn.Linear(6, 6)

    def forward(self, x):
        h = self.fc(x)
        start = torch.zeros(x.shape[0], 6)
        if x.mean() > 0.5:
            h += 1
            y = self.up(h) + start
        elif x.mean() < -0.5:
            y = self.down(h) - 1
        else:
            y = h * 2
        return y.relu()


def gate_inputs():
    generator = torch.Generator().manual_seed(0)
    return [(torch.randn(batch, 6, generator=generator) * 0.1 + offset,) for batch in (1, 2, 5) for offset in
            (-1.0, 0.0, 1.0)]


def test_stages_are_timed_and_dumped(tmp_path, monkeypatch):
    monkeypatch.setenv("DYCL_DUMP", str(tmp_path / "dump"))
    model = Gate().eval()
    compiled = dycl.compile(model, torch.randn(2, 6))
    assert assert_equivalent(model, compiled, gate_inputs(), atol=1e-5) == 3
    names = [name for name, _ in STAGES]
    assert names == ["rewrite", "build", "optimize", "explore", "ports", "compile", "lower", "emit"]
    assert list(compiled.stats["stages"]) == names
    assert set(compiled.stats["seconds"]) == {"rewrite", "hcfg", "compile", "host"}
    assert sorted(s for stages in PHASES.values() for s in stages) == sorted(names)
    dumped = sorted(p.name for p in (tmp_path / "dump").iterdir())
    assert dumped == [f"{n}-{name}.txt" for n, name in enumerate(names)]
    assert "def forward" in (tmp_path / "dump" / "0-rewrite.txt").read_text()
    assert "shape=diamond" in (tmp_path / "dump" / "2-optimize.txt").read_text()
    assert (tmp_path / "dump" / "7-emit.txt").read_text() == compiled.host_source + "\n"


def test_no_dump_without_the_switch(tmp_path, monkeypatch):
    monkeypatch.delenv("DYCL_DUMP", raising=False)
    monkeypatch.chdir(tmp_path)
    dycl.compile(Gate().eval(), torch.randn(2, 6))
    assert list(tmp_path.iterdir()) == []


# -- hcfg.observations, without the frontend ------------------------------------------------------

def _statement(source: str) -> cst.SimpleStatementLine:
    return cst.parse_module(source).body[0]


def _run(observations: Observations, stmt: cst.SimpleStatementLine, state: dict) -> None:
    reads = observations.reads(stmt, state)
    with DecisionRecorder() as recorder:
        exec(cst.Module([stmt]).code, state)  # noqa: S102 - the test's own statement
    observations.record(stmt, reads, state, bool(recorder.decisions))


def test_replay_needs_the_same_unmodified_objects():
    observations = Observations({"x", "y"})
    stmt = _statement("y = x * 2\n")
    x = torch.arange(3.0)
    built = {"torch": torch, "x": x}
    _run(observations, stmt, built)

    assert not observations.replay((stmt,), {"x": x.clone()})  # equal values, another object
    assert not observations.replay((_statement("y = x * 2\n"),), {"x": x})  # another statement
    explored = {"x": x}
    assert observations.replay((stmt,), explored) and explored["y"] is built["y"]
    assert not observations.replay((stmt,), {"x": x})  # handed out once: paths never share a result


def test_no_replay_after_an_in_place_update():
    observations = Observations({"x", "y"})
    stmt = _statement("y = x * 2\n")
    x = torch.arange(3.0)
    _run(observations, stmt, {"x": x})
    x.add_(1)  # the input changed: its result would be stale
    assert not observations.replay((stmt,), {"x": x})

    built = {"x": torch.arange(3.0)}
    _run(observations, stmt, built)
    built["y"].mul_(0)  # the result changed after the build saw it
    assert not observations.replay((stmt,), {"x": built["x"]})


def test_a_sequence_replays_whole_or_not_at_all():
    observations = Observations({"x", "y", "z"})
    first, second = _statement("y = x + 1\n"), _statement("z = y * x\n")
    x = torch.ones(2)
    built = {"x": x}
    _run(observations, first, built)
    _run(observations, second, built)
    state = {"x": x}
    assert observations.replay((first, second), state)
    assert torch.equal(state["z"], torch.full((2,), 2.0))

    third = _statement("w = z - 1\n")  # never seen: nothing is bound
    observations = Observations({"x", "y", "z", "w"})
    _run(observations, first, {"x": x})
    state = {"x": x}
    assert not observations.replay((first, third), state) and state == {"x": x}


def test_not_recorded_a_decision_a_list_or_an_unknown_read():
    observations = Observations({"x", "y", "items"})
    decides = _statement("y = x * 2 if bool(x.sum() > 0) else x\n")
    x = torch.ones(2)
    _run(observations, decides, {"x": x})
    assert not observations.replay((decides,), {"x": x})  # run again: its error must be raised again

    listed = _statement("y = [x, x]\n")
    _run(observations, listed, {"x": x})
    assert not observations.replay((listed,), {"x": x})  # a list can be appended to: never shared

    reads_object = _statement("y = x * len(items)\n")
    items = {"a": 1}
    _run(observations, reads_object, {"x": x, "items": items})
    assert not observations.replay((reads_object,), {"x": x, "items": items})  # a dict's changes are not seen
