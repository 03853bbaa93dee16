"""``hcfg.decisions``: a bool the trace already decided is no new decision when read again
with ``.item()``; ``hcfg.traced_shapes``: which values read during a trace are sizes only."""

from __future__ import annotations

import io
import warnings

import torch
from dycl.hcfg.decisions import DecisionRecorder
from dycl.hcfg.traced_shapes import reads_only_shapes


def test_an_item_of_a_bool_already_decided_is_not_a_second_decision():
    flag = torch.tensor(3) > 1
    with DecisionRecorder() as recorder:
        if flag and True:  # transformers: is_causal = q_length > 1 and ...
            decided = flag.item()
    assert decided is True
    assert [d.what for d in recorder.decisions] == ["bool()"]


def test_an_item_alone_or_of_a_changed_tensor_is_a_decision():
    flag = torch.tensor(True)
    with DecisionRecorder() as recorder:
        flag.item()
    assert [d.what for d in recorder.decisions] == [".item()"]
    with DecisionRecorder() as recorder:
        bool(flag)
        flag.logical_not_()  # the same tensor, another value
        assert flag.item() is False
    assert [d.what for d in recorder.decisions] == ["bool()", ".item()"]


class SizeReads(torch.nn.Module):
    def __init__(self, seen: dict[str, bool]) -> None:
        super().__init__()
        self.seen = seen

    def forward(self, x):
        rows = x.size(0)  # a traced 0-d tensor while the ONNX exporter traces
        self.seen["rows"] = reads_only_shapes(rows)
        self.seen["rows * 2 + 1"] = reads_only_shapes(rows * 2 + 1)
        self.seen["sum"] = reads_only_shapes(x.sum())
        self.seen["rows + sum"] = reads_only_shapes(rows + x.sum())
        self.seen["positive rows"] = reads_only_shapes(x[x > 0].size(0))
        return x * 2


def test_only_values_computed_from_input_sizes_are_shape_reads():
    seen: dict[str, bool] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(SizeReads(seen), (torch.randn(3, 2),), io.BytesIO(), dynamo=False, input_names=["x"],
                          dynamic_axes={"x": {0: "rows"}})
    assert seen == {"rows": True, "rows * 2 + 1": True, "sum": False, "rows + sum": False, "positive rows": False}
    assert reads_only_shapes(torch.tensor(3)) is False  # not tracing
