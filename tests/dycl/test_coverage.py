"""Branch coverage measured on the compiled host: per condition, how many inputs took each outcome."""

from __future__ import annotations

import inspect

import torch
import torch.nn as nn

import dycl
from dycl.harness.coverage import HostCoverage, compiled_coverage
from tests.dycl.factories import EarlyExitCNN


def _exit_line() -> int:
    lines, first = inspect.getsourcelines(EarlyExitCNN.forward)
    return first + next(i for i, text in enumerate(lines) if "# the early exit" in text)


def test_an_exit_no_input_takes_is_reported_with_its_source_line():
    torch.manual_seed(0)
    model = EarlyExitCNN().eval()
    compiled = dycl.compile(model, torch.randn(1, 3, 8, 8))
    inputs = [torch.randn(1, 3, 8, 8) for _ in range(12)]
    report = dycl.check(model, compiled, inputs, traced=False, repeat=1)
    assert report.eta == 0.0 and report.paths == 1 and report.compiled_paths == 1
    assert report.coverage == "0 of 1" and report.both_outcomes == 0
    (row,) = report.conditions
    assert (row["true"], row["false"], row["where"]) == (0, 12, f"factories.py:{_exit_line()}")
    assert row["code"] == "if early.softmax(-1).max() > self.threshold:  # the early exit"
    (warning,) = report.warnings
    assert f"factories.py:{_exit_line()}" in warning and "its true branch was not checked" in warning
    table = report.table()
    assert "conditions, both outcomes   0 of 1" in table and "warning: condition 0 at factories.py:" in table
    assert report.to_json()["both_outcomes"] == 0 and report.to_json()["conditions"][0]["false"] == 12
    assert report.sub_dnns_run == report.sub_dnns == 2 and report.never_run == ()  # the exit returns a value


def test_the_same_model_with_inputs_that_take_the_exit_has_both_outcomes():
    torch.manual_seed(0)
    model = EarlyExitCNN(threshold=0.45).eval()
    inputs = [torch.randn(1, 3, 8, 8) * scale for scale in (0.1, 3.0, 10.0) for _ in range(6)]
    compiled = dycl.compile(model, inputs[0])
    report = dycl.check(model, compiled, inputs, traced=False, repeat=1)
    (row,) = report.conditions
    assert row["true"] > 0 and row["false"] > 0 and row["true"] + row["false"] == 18
    assert report.coverage == "1 of 1" and report.warnings == ()
    assert report.paths == report.compiled_paths == 2 and report.eta == 0.0


class TwoGates(nn.Module):
    """Two gates, one with a gate nested in it: 6 host paths."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        if x[0, 0] > 0:
            x = self.a(x)
            if x[0, 1] > 0:
                x = torch.relu(x)
        if x[0, 2] > 0:
            x = self.b(x)
        return self.c(x)


def test_outcome_counts_and_paths_match_eager_on_a_nested_model(tmp_path):
    torch.manual_seed(0)
    model = TwoGates().eval()
    inputs = [(torch.randn(1, 4),) for _ in range(60)]
    compiled = dycl.compile(model, inputs[0][0])
    tally = compiled_coverage(compiled, inputs)
    eager_first = sum(1 for (x,) in inputs if x[0, 0] > 0)
    eager_last = []
    for (x,) in inputs:
        with torch.no_grad():
            h = model.a(x) if x[0, 0] > 0 else x
            eager_last.append(bool(h[0, 2] > 0))
    rows = tally.conditions()
    assert len(rows) == 3
    assert (rows[0]["true"], rows[0]["false"]) == (eager_first, 60 - eager_first)
    assert rows[1]["true"] + rows[1]["false"] == eager_first  # the nested gate only where the first was true
    assert (rows[2]["true"], rows[2]["false"]) == (sum(eager_last), 60 - sum(eager_last))
    report = dycl.check(model, compiled, [x for (x,) in inputs], traced=False, repeat=0)
    assert report.paths == report.compiled_paths == 6 and report.coverage == "3 of 3"
    assert report.sub_dnns_run == report.sub_dnns and report.never_run == ()
    negative = [x.abs().neg() for (x,) in inputs[:10]]  # the first gate never opens
    narrow = dycl.check(model, compiled, negative, traced=False, repeat=0)
    assert narrow.coverage == "0 of 3" and len(narrow.never_run) >= 1
    assert [(r["true"], r["false"]) for r in narrow.conditions] == [(0, 10), (0, 0), (0, 10)]
    assert any("was never reached" in w for w in narrow.warnings)
    assert any(w.startswith("sub-DNNs never run by any input: ") for w in narrow.warnings)
    # the torch-free saved host records the same outcomes
    loaded = dycl.load(compiled.save(tmp_path / "gates"))
    saved = compiled_coverage(loaded, inputs)
    assert [(r["true"], r["false"], r["where"]) for r in saved.conditions()] == \
        [(r["true"], r["false"], r["where"]) for r in rows]


def test_recording_changes_neither_the_host_nor_its_results():
    torch.manual_seed(0)
    model = TwoGates().eval()
    compiled = dycl.compile(model, torch.randn(1, 4))
    assert "_record" not in compiled.host_source and "settrace" not in compiled.host_source
    recorder = HostCoverage(compiled._host, compiled.host_source)
    x = torch.randn(1, 4)
    result, trace = recorder.record(compiled, x)
    assert torch.equal(result, compiled(x)) and trace.outcomes and trace.ran
