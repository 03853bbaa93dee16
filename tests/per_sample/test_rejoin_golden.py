"""Golden before/after of ``dycl.per_sample.rejoin`` on HCFGs built directly: a gate whose
branches rejoin becomes selections in one sub-DNN with the sub-DNNs around it; what cannot
be proven (a branch value the build never saw, an equality float32 cannot decide, a host
operation in a branch) keeps the condition."""

from __future__ import annotations

import libcst as cst
import torch
from dycl.hcfg.annotate import annotate
from dycl.hcfg.graph import HCFG, Cond, HostOp, Return, SubDNN, source_of

from dycl.per_sample.predicate import if_convert


def _line(source: str) -> cst.SimpleStatementLine:
    statement = cst.parse_statement(source + "\n")
    assert isinstance(statement, cst.SimpleStatementLine)
    return statement


def _graph(test: str = "g.item() > 0.5", then: tuple = ()) -> HCFG:
    """``h = stem(x); g = gate(h); if <test>: h = h + block(h); y = head(h); return y``."""
    branch = then or (SubDNN(2, (_line("h = h + self.block(h)"),)),)
    cond = cst.parse_statement(f"if {test}:\n    pass\n")
    assert isinstance(cond, cst.If)
    body = (SubDNN(0, (_line("h = self.stem(x)"), _line("g = self.gate(h)"))),
            Cond(1, cond, cond.test, branch, ()),
            SubDNN(3, (_line("y = self.head(h)"),)),
            Return(_line("return y"), cst.Name("y")))
    return annotate(HCFG("forward", ("x",), body, frozenset({"h", "g", "y", "n"})))


_PRODUCED = {0: {"h": torch.zeros(1, 4, 3, 3), "g": torch.zeros(1, 1)}, 2: {"h": torch.zeros(1, 4, 3, 3)},
             3: {"y": torch.zeros(1, 2)}}


def _lines(graph: HCFG) -> list[list[str]]:
    return [[source_of(s.body[0]) for s in sub.statements] for sub in graph.sub_dnns]


def test_a_gate_becomes_a_selection_in_one_sub_dnn():
    converted, count = if_convert(_graph(), _PRODUCED)
    assert count == 1 and not converted.conditions
    assert _lines(converted) == [[
        "h = self.stem(x)",
        "g = self.gate(h)",
        "_dycl_selected_gate_1 = (g > 0.5)",
        "h_1 = h + self.block(h)",
        "h = h_1.where(_dycl_selected_gate_1.reshape(1, 1, 1, 1), h)",
        "y = self.head(h)",
    ]]
    assert converted.sub_dnns[0].outputs == ("y",)


def test_a_threshold_float32_cannot_hold_is_its_exact_neighbour():
    converted, _ = if_convert(_graph("g.item() >= 0.8"), _PRODUCED)
    assert "_dycl_selected_gate_1 = (g >= 0.800000011920929)" in _lines(converted)[0]
    converted, _ = if_convert(_graph("0.8 < g.item()"), _PRODUCED)  # flipped: g > down(0.8)
    assert "_dycl_selected_gate_1 = (g > 0.7999999523162842)" in _lines(converted)[0]


def test_what_cannot_be_proven_keeps_the_condition():
    unseen = {index: values for index, values in _PRODUCED.items() if index != 2}  # the build never ran the block
    host_op = (HostOp(_line("n = len(h)")), SubDNN(2, (_line("h = h + self.block(h)"),)))
    for graph, produced in [(_graph(), unseen), (_graph("g.item() == 0.1"), _PRODUCED),
                            (_graph("g.sum() > 0.5"), _PRODUCED), (_graph(then=host_op), _PRODUCED)]:
        converted, count = if_convert(graph, produced)
        assert count == 0 and len(converted.conditions) == 1 and len(converted.sub_dnns) == 3
