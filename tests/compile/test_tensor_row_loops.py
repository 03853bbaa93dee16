"""Loops over the rows of an input (``rewriter.tensor_rows``), written as people write them: a
per-channel gate over ``enumerate(x.unbind(1))``, a ``zip`` of two inputs' columns, a recurrent
cell stepping over ``range(x.size(1))`` with an early ``break``, the rows of the first sample, the
best of them by ``max(list(x[0]), key=...)`` and ``max(x.unbind(1), key=...)``, and ``for sample in
x`` compiled with ``dynamic=False``. Each against eager in process and as a
torch-free host on inputs that take several paths (counted, asserted); a loop over the symbolic
batch dim refused at its line with the dim and the hint; a static dim checked on every call."""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn as nn

import dycl
from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host


class ChannelGate(nn.Module):
    """Keeps a channel only where its mean is positive, scaled by a learned per-channel factor."""

    def __init__(self, channels: int = 3) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, channels))

    def forward(self, x):
        kept = []
        for c, plane in enumerate(x.unbind(1)):
            if plane.mean() > 0:
                kept.append(plane * self.scale[c])
            else:
                kept.append(torch.zeros_like(plane))
        return torch.stack(kept, dim=1)


class PairedFeatures(nn.Module):
    def forward(self, x, y):
        acc = torch.zeros_like(x[:, 0])
        for a, b in zip(x.unbind(1), y.unbind(1)):
            if (a * b).sum() > 0:
                acc = acc + a * b
            else:
                acc = acc - b
        return acc


class EarlyStopRNN(nn.Module):
    """Steps a cell over the time dim; stops once the state saturates."""

    def __init__(self, features: int = 4, hidden: int = 5) -> None:
        super().__init__()
        self.inp = nn.Linear(features, hidden)
        self.rec = nn.Linear(hidden, hidden, bias=False)

    def forward(self, x):
        h = x.new_zeros(x.size(0), self.rec.in_features)
        for t in range(x.size(1)):
            h = torch.tanh(self.inp(x[:, t]) + self.rec(h))
            if h.abs().mean() > 0.6:
                break
        return h


class FirstSampleRows(nn.Module):
    def forward(self, x):
        total = torch.zeros_like(x[0, 0])
        for row in x[0]:
            if row.max() > 1.5:
                break
            total = total + row
        return total


class PerSample(nn.Module):
    def forward(self, x):
        outs = []
        for sample in x:
            if sample.sum() > 0:
                sample = sample.flip(0)
            else:
                sample = sample * 2
            outs.append(sample)
        return torch.stack(outs)


class BestRow(nn.Module):
    """The row of the first sample with the largest sum, as a list of rows and ``max(..., key=...)``."""

    def forward(self, x):
        rows = list(x[0])
        best = max(rows, key=lambda r: r.sum())
        return best * 2


class LoudestChannel(nn.Module):
    def forward(self, x):
        return max(x.unbind(1), key=lambda c: c.abs().mean())


def _tensors(shape: tuple[int, ...], count: int, seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator) * (0.5 + i % 3) + (i % 5 - 2) * 0.3 for i in range(count)]


def _batch_sizes(shape: tuple[int, ...], count: int, seed: int) -> list[torch.Tensor]:
    """Inputs of ``shape`` with the batch (dim 0) varying: the static dims stay the example's."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(1 + i % 3, *shape[1:], generator=generator) * (0.5 + i % 3) + (i % 5 - 2) * 0.3
            for i in range(count)]


@pytest.mark.parametrize("make, inputs, min_paths", [
    (ChannelGate, lambda: _batch_sizes((2, 3, 4), 24, 0), 4),
    (PairedFeatures, lambda: list(zip(_batch_sizes((2, 3), 24, 1), _batch_sizes((2, 3), 24, 2))), 4),
    (EarlyStopRNN, lambda: _batch_sizes((2, 5, 4), 24, 3), 3),
    (FirstSampleRows, lambda: _batch_sizes((2, 4, 3), 24, 4), 3),
])
def test_a_loop_over_an_inputs_rows_along_a_static_dim_agrees_with_eager(make, inputs, min_paths, tmp_path):
    torch.manual_seed(0)
    paths = assert_agrees_in_process_and_as_host(make().eval(), inputs(), tmp_path, atol=1e-5, min_paths=min_paths)
    assert paths >= min_paths, paths


@pytest.mark.parametrize("make, shape, winner", [
    (BestRow, (2, 4, 3), lambda x: int(x[0].sum(-1).argmax())),
    (LoudestChannel, (2, 3, 5), lambda x: int(x.abs().mean(dim=(0, 2)).argmax())),
])
def test_the_best_of_an_inputs_rows_by_a_key_agrees_with_eager(make, shape, winner, tmp_path):
    inputs = _batch_sizes(shape, 24, 6)
    winners = {winner(x) for x in inputs}
    assert len(winners) >= 3, winners  # several rows win: each is a path of the host's comparisons
    assert_agrees_in_process_and_as_host(make().eval(), inputs, tmp_path, atol=1e-6)


def test_a_loop_over_the_batch_compiled_with_dynamic_false_unrolls_the_examples_rows(tmp_path):
    model = PerSample().eval()
    inputs = _tensors((3, 4), 24, 5)
    paths = assert_agrees_in_process_and_as_host(model, inputs, tmp_path, atol=1e-6, min_paths=4, dynamic=False)
    assert paths >= 4, paths  # the three samples each take one of two branches


def test_a_static_dim_that_a_loop_unrolled_is_checked_on_every_call(tmp_path):
    compiled = dycl.compile(EarlyStopRNN().eval(), torch.randn(2, 5, 4))
    with pytest.raises(ValueError, match="dimension 1 is static: 5"):
        compiled(torch.randn(2, 7, 4))  # seven steps, not five: refused, never the first five
    host = dycl.load(compiled.save(tmp_path / "rnn"))
    with pytest.raises(ValueError, match="dimension 1 is static: 5"):
        host(torch.randn(2, 7, 4).numpy())


def _line_of(model_class: type, text: str) -> int:
    lines, first = inspect.getsourcelines(model_class.forward)
    return first + next(i for i, line in enumerate(lines) if text in line)


class OverTheBatch(nn.Module):
    def forward(self, x):
        total = x[0] * 0
        for i, r in enumerate(x.unbind(0)):
            total = total + i * r
        return total


class StepsOverTheBatch(nn.Module):
    def forward(self, x):
        out = x[0]
        for i in range(1, x.size(0)):
            out = out * x[i]
        return out


@pytest.mark.parametrize("model_class, text, construct", [
    (PerSample, "for sample in x", "a for loop over the rows of x along its dim 0, which dynamic= makes symbolic"),
    (OverTheBatch, "for i, r in enumerate", "a for loop over the rows of x along its dim 0, which dynamic= makes"),
    (StepsOverTheBatch, "for i in range(1, x.size(0))", "a for loop over range(n) whose n comes from the input"),
])
def test_a_loop_over_the_symbolic_batch_is_refused_with_the_dim_and_the_hint(model_class, text, construct):
    with pytest.raises(dycl.UnsupportedError) as caught:
        dycl.compile(model_class().eval(), torch.randn(3, 4))
    message = str(caught.value)
    assert construct in message
    assert f"{__file__}:{_line_of(model_class, text)}" in message
    assert "dynamic=False" in message


class UnsqueezedInPlace(nn.Module):
    def forward(self, x):
        x.unsqueeze_(0)  # x is now (1, T, D): its rows are not the example's T
        total = x[0, 0] * 0
        for row in x:
            total = total + row.sum(0)
        return total


def test_an_input_reshaped_in_place_gives_its_rows_no_static_count():
    with pytest.raises(dycl.UnsupportedError, match="a for loop over a value that is not known at compile time"):
        dycl.compile(UnsqueezedInPlace().eval(), torch.randn(3, 4), dynamic=False)


class TargetShadowsInput(nn.Module):
    """The loop target rebinds the input's name: the inner loop counts the rows of each item, not the input's."""

    def forward(self, x):
        total = x.sum() * 0
        for x in (x[0], x[0, :1]):  # noqa: B020 (the point of the test)
            for row in x:
                if row.sum() > 0:
                    total = total + row.sum()
        return total


def test_a_loop_target_that_rebinds_an_input_counts_the_items_rows(tmp_path):
    inputs = _tensors((2, 3, 4), 24, 8)
    paths = assert_agrees_in_process_and_as_host(TargetShadowsInput().eval(), inputs, tmp_path, atol=1e-5,
                                                 min_paths=4, dynamic=False)
    assert paths >= 4, paths  # 3 + 1 rows, each kept or not


class Unbatcher(nn.Module):
    def forward(self, x):
        x.squeeze_(0)
        return x


class HelperReshapesInPlace(nn.Module):
    """A helper squeezes the input in place: after it, its rows are not the example's dim 0."""

    def __init__(self) -> None:
        super().__init__()
        self.prepare = Unbatcher()

    def forward(self, x):
        self.prepare(x)
        total = x[0] * 0
        for row in x:
            total = total + row
        return total


def test_an_input_reshaped_in_place_by_a_helper_gives_its_rows_no_static_count():
    with pytest.raises(dycl.UnsupportedError, match="a for loop over a value that is not known at compile time"):
        dycl.compile(HelperReshapesInPlace().eval(), torch.randn(1, 3, 4), dynamic=False)
