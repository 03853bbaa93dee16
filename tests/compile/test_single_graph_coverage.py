"""The lowered single graph reports what the host form reports (``hostgen.decisions``): each of the
model's conditions with its outcomes, the paths and the sub-DNNs run, in process and loaded from
its artifact; the self-check's branch search works on it; a vector that disagrees with the
model's control flow is refused, never turned into coverage."""

from __future__ import annotations

import pytest
import torch
from dycl.hcfg.levers import Levers
from dycl.hostgen.decisions import Decisions
from torch import nn

import dycl
from dycl.harness.coverage import compiled_coverage
from dycl.harness.self_check_inputs import derived_inputs
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch
from tests.compile.test_single_graph import NestedDecisions, PartialExit, SkipWithCounter
from tests.dycl.test_self_check_search import FarBranch

HOST, ONE_GRAPH = Levers(single_graph="off"), Levers(single_graph="on")


class Router(nn.Module):
    """Written as a user would: a confidence exit, a gated refinement inside the other side, and a
    fallback return; the refinement's join is inside a side that returns."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 6))
        self.refine = nn.Linear(6, 6)
        self.head = nn.Linear(6, 3)

    def forward(self, x):
        h = self.encoder(x)
        logits = self.head(h)
        if logits.softmax(-1).max() > 0.6:
            return logits
        if h.norm() > 2.0:
            if h.mean() > 0:
                h = self.refine(h)
            return self.head(h) * 0.5
        return self.head(-h)


MODELS = {"nested": (NestedDecisions, (3, 6)), "joins": (SkipWithCounter, (2, 8)),
          "partial exit": (PartialExit, (2, 6)), "router": (Router, (1, 6))}


def _inputs(shape: tuple[int, ...], seed: int = 3) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=generator) * scale for scale in (0.1, 0.5, 1.0, 3.0, 10.0)
            for _ in range(8)]


def _coverage(tally) -> tuple:
    return tally.conditions(), sorted(tally.paths), dict(sorted(tally.ran.items())), tally.sub_dnns, tally.warnings()


@pytest.mark.parametrize("name", list(MODELS))
def test_the_one_graph_reports_the_host_form_s_coverage_in_process_and_loaded(name, tmp_path):
    torch.manual_seed(0)
    cls, shape = MODELS[name]
    model = cls().eval()
    inputs = _inputs(shape)
    host = dycl.compile(model, inputs[0], optimize=HOST)
    single = dycl.compile(model, inputs[0], optimize=ONE_GRAPH)
    assert single.stats["single_graph"]["chosen"] == "single_graph" and len(single.manifest.sub_dnns) == 1
    paths = assert_equivalent(model, single, inputs, min_paths=2, atol=1e-5)
    expected = _coverage(compiled_coverage(host, [(x,) for x in inputs]))
    assert len(expected[1]) == paths >= 2 and expected[0] and expected[3]  # the host's paths are eager's
    assert _coverage(compiled_coverage(single, [(x,) for x in inputs])) == expected
    loaded = dycl.load(single.save(tmp_path / "artifact"))
    loaded_host = dycl.load(host.save(tmp_path / "host"))
    assert _coverage(compiled_coverage(loaded, [(x,) for x in inputs])) == _coverage(
        compiled_coverage(loaded_host, [(x,) for x in inputs]))
    report = run_host_without_torch(tmp_path / "artifact", model, inputs, 1e-5)
    assert report["checked"] == len(inputs) and report["problems"] == [], report


def test_dycl_check_reports_the_same_conditions_paths_and_sub_dnns():
    torch.manual_seed(0)
    model = Router().eval()
    inputs = _inputs((1, 6), seed=5)
    reports = [dycl.check(model, dycl.compile(model, inputs[0], optimize=levers), inputs, traced=False, repeat=0)
               for levers in (HOST, ONE_GRAPH)]
    fields = ("conditions", "compiled_paths", "sub_dnns", "sub_dnns_run", "never_run", "warnings", "paths", "eta")
    host, single = ({key: getattr(report, key) for key in fields} for report in reports)
    assert single == host and host["eta"] == 0.0 and host["compiled_paths"] == host["paths"] >= 3
    assert [row["code"] for row in single["conditions"]][0] == "if logits.softmax(-1).max() > 0.6:"


def test_the_self_check_searches_the_one_graph_s_conditions():
    """FarBranch's true side needs values far beyond the example's: only the branch search reaches
    it, through the outcomes the one graph reports."""
    model = FarBranch().eval()
    example = torch.randn(2, 4, generator=torch.Generator().manual_seed(0))
    compiled = dycl.compile(model, example, optimize=ONE_GRAPH, check=True)
    assert compiled.stats["single_graph"]["chosen"] == "single_graph"
    fixed = sum(1 for _ in derived_inputs((example,), {}, {id(example): (0,)}))
    assert compiled.stats["self_check"]["inputs"] == fixed + 1
    inputs = [example * scale for scale in (1.0, 0.5, 30.0, 60.0)]
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5) == 2


def test_a_vector_that_disagrees_with_the_control_flow_is_refused():
    decisions = Decisions("d", (("m.py:3", "a"), ("m.py:5", "b")),
                          (["call", 0], ["if", 0, [["call", 1], ["return"]], []], ["if", 1, [["call", 2]], []],
                           ["return"]))
    assert decisions.replay([1, -1]) == (((0, True),), frozenset({0, 1}))
    assert decisions.replay([0, 0]) == (((0, False), (1, False)), frozenset({0}))
    assert decisions.sub_dnns == [0, 1, 2]
    with pytest.raises(ValueError, match="no outcome"):
        decisions.replay([0, -1])  # condition 1 is reached after 0 is false
    with pytest.raises(ValueError, match="visits"):
        decisions.replay([1, 0])  # condition 1 is not reached after the return
    assert Decisions.from_json(decisions.to_json()) == decisions
