"""Fresh hunt, family 6: writes that reach a caller's tensor through another name (an item
assignment to a ``reshape``/``squeeze`` view, an in-place call on an element of ``chunk``'s
tuple, ``x.data.clamp_``, an item assignment into ``x.flatten()``/``x.view(-1)``/``x.data``, an in-place
call on ``x.T``), ``out=`` arguments and ``x.unsqueeze_(0)`` on the caller's tensor. Each was a
wrong answer (the compiled model left the caller's tensor, and what is computed from it, as it
was: the exporter drops an update through a view, and the host's numpy ``flatten`` copies) or a
crash (the exporter's ``TypeError``; numpy's ``view``/``data`` on the host; a rank error)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from tests.soundness.fresh_hunt import Case, at, check_case, seeded


class ZeroFirstThroughReshape(nn.Module):  # a flat view written by index: x changes too
    def forward(self, x):
        flat = x.reshape(-1)
        if x.sum() > 0:
            flat[0] = 0.0
        return x * 2


class RowWriteThroughSqueeze(nn.Module):
    def forward(self, x):
        y = x.unsqueeze(0).squeeze(0)
        if x.sum() > 0:
            y[0] = 1.0
        return x * 2


class ResetFirstChunk(nn.Module):  # an element of chunk's tuple, updated in place
    def forward(self, x):
        parts = x.chunk(2, dim=0)
        if x.sum() > 0:
            parts[0].fill_(0.0)
        return x * 2


class ClampThroughData(nn.Module):  # the old-style way to clip a tensor without autograd seeing it
    def forward(self, x):
        if x.sum() > 0:
            x.data.clamp_(max=0.5)
        return x * 2


class ClampParameterCopy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        h.data.clamp_(min=-0.1)
        if h.mean() > 0:
            return h * 2
        return h


class DoubleIntoInput(nn.Module):
    def forward(self, x):
        torch.mul(x, 2, out=x)
        if x.sum() > 0:
            return x.sum()
        return x.mean()


class AddIntoBuffer(nn.Module):
    def forward(self, x):
        buf = torch.empty_like(x)
        torch.add(x, 1, out=buf)
        if buf.sum() > 0:
            return buf
        return -buf


class AddBatchDimInPlace(nn.Module):  # the caller's tensor gains a dim: eager changes its shape too
    def forward(self, x):
        x.unsqueeze_(0)
        if x.sum() > 0:
            return x * 2
        return -x


class TransposeLocalInPlace(nn.Module):  # the same kind of call on the model's own tensor compiles
    def forward(self, x):
        y = x * 2
        y.t_()
        if y.sum() > 0:
            return y
        return -y


class FirstThroughFlatten(nn.Module):  # flatten() of a contiguous tensor is a view: x changes
    def forward(self, x):
        if x.sum() > 0:
            x.flatten()[0] = 5.0
        return x * 2


class FirstThroughView(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            x.view(-1)[0] = 5.0
        return x * 2


class FirstThroughData(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            x.data[0] = 3.0
        return x * 2


class ScaleTransposed(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            x.T.mul_(2)
        return x + 1


class RowOfTranspose(nn.Module):  # a write through .T, which numpy's .T views alike, compiles
    def forward(self, x):
        if x.sum() > 0:
            x.T[0] = 5.0
        return x * 2


class NestedItem(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            x[0][1] = 5.0
        return x * 2


class RowReadBeforeWrite(nn.Module):  # y views x's first row, then x is written by index
    def forward(self, x):
        y = x[0]
        if x.sum() > 0:
            x[0, 1] = 5.0
        return y * 2


def _signed_inputs(seed):
    def make():
        g = seeded(seed)
        return [torch.randn(2, 4, generator=g) + (1.5 if i % 2 else -1.5) for i in range(50)]
    return make


CASES = {
    "reshape_item_write": Case(ZeroFirstThroughReshape, _signed_inputs(61), 2,
                               refused=at("in-place update of `flat`", "flat[0] = 0.0")),
    "squeeze_item_write": Case(RowWriteThroughSqueeze, _signed_inputs(62), 2,
                               refused=at("in-place update of `y`", "y[0] = 1.0")),
    "chunk_element_fill": Case(ResetFirstChunk, _signed_inputs(63), 2,
                               refused=at("in-place update of `parts`", "parts[0].fill_(0.0)")),
    "data_clamp_input": Case(ClampThroughData, _signed_inputs(64), 2),
    "data_clamp_local": Case(ClampParameterCopy, _signed_inputs(65), 2),
    "out_into_input": Case(DoubleIntoInput, _signed_inputs(66), 2,
                           refused=at("`out=` in a call of torch.mul", "torch.mul(x, 2, out=x)")),
    "out_into_local": Case(AddIntoBuffer, _signed_inputs(67), 2,
                           refused=at("`out=` in a call of torch.add", "torch.add(x, 1, out=buf)")),
    "unsqueeze_input_in_place": Case(AddBatchDimInPlace, _signed_inputs(68), 2,
                                     refused=at("in-place change of the shape of the caller's argument `x`",
                                                "x.unsqueeze_(0)")),
    "transpose_local_in_place": Case(TransposeLocalInPlace, _signed_inputs(69), 2),
    "flatten_item_write": Case(FirstThroughFlatten, _signed_inputs(121), 2,
                               refused=at("item assignment into `x.flatten\\(\\)`", "x.flatten()[0] = 5.0")),
    "view_item_write": Case(FirstThroughView, _signed_inputs(122), 2,
                            refused=at("item assignment into `x.view\\(-1\\)`", "x.view(-1)[0] = 5.0")),
    "data_item_write": Case(FirstThroughData, _signed_inputs(123), 2,
                            refused=at("item assignment into `x.data`", "x.data[0] = 3.0")),
    "transpose_property_in_place": Case(ScaleTransposed, _signed_inputs(124), 2,
                                        refused=at("in-place update through `x.T`", "x.T.mul_(2)")),
    "transpose_property_item_write": Case(RowOfTranspose, _signed_inputs(125), 2),
    "nested_item_write": Case(NestedItem, _signed_inputs(126), 2),
    "item_write_under_a_view": Case(RowReadBeforeWrite, _signed_inputs(127), 2,
                                    refused=at("in-place update of `x`, whose tensor `y` also refers to",
                                               "x[0, 1] = 5.0")),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_write_through_another_name(name, tmp_path):
    case = CASES[name]
    assert check_case(case, tmp_path) == case.paths
