"""Loop exits and structured control flow: while loops, break, continue, early return, elif, loop else."""

from __future__ import annotations

import torch
from rewrite_checks import assert_no_static_ifs, build, called_indices, check, count_ifs, randn_inputs
from torch import nn


def _linears(n: int) -> nn.ModuleList:
    return nn.ModuleList([nn.Linear(8, 8) for _ in range(n)])


class BoundedWhile(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.Linear(8, 8)
        self.max_steps = 4

    def forward(self, x):
        step = 0
        while step < self.max_steps:
            x = torch.tanh(self.cell(x))
            if x.sum() > 0.5:
                break
            step += 1
        return x, step


def test_bounded_while_with_tensor_break():
    model = build(BoundedWhile)
    checked = check(model, randn_inputs(1, 8), min_paths=3)
    assert count_ifs(checked.tree) == 4
    assert checked.source.count("self.cell(") == 4
    assert "max_steps" not in checked.source
    assert_no_static_ifs(checked.tree)


class WhileTrue(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.Linear(8, 8)
        self.max_steps = 3

    def forward(self, x):
        n = 0
        while True:
            x = torch.tanh(self.cell(x))
            n += 1
            if n >= self.max_steps:
                break
            if x.mean() > 0.1:
                break
        return x, n


def test_while_true_with_counter_and_tensor_breaks():
    model = build(WhileTrue)
    checked = check(model, randn_inputs(1, 8), min_paths=3)
    # the counter test folds; only the tensor tests of the first max_steps - 1 iterations remain
    assert count_ifs(checked.tree) == 2
    assert checked.source.count("self.cell(") == 3
    assert "max_steps" not in checked.source
    assert_no_static_ifs(checked.tree)


class BreakInFor(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(3)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
            if x.sum() > 1.0:
                break
            x = torch.tanh(x)
        return x


def test_break_in_for():
    model = build(BreakInFor)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 3
    assert called_indices(checked.source, "layers") == ["0", "1", "2"]


class ContinueInFor(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(3)

    def forward(self, x):
        for layer in self.layers:
            if x.sum() < 0:
                x = x * -0.5
                continue
            x = layer(x)
        return x


def test_continue_in_for():
    model = build(ContinueInFor)
    checked = check(model, randn_inputs(2, 8), min_paths=4)
    # the rest of the loop follows both ways through each iteration's if, so it is copied into both branches
    assert set(called_indices(checked.source, "layers")) == {"0", "1", "2"}
    assert 3 <= count_ifs(checked.tree) <= 7
    assert "if x.sum() < 0:" in checked.source and "x = x * -0.5" in checked.source


class EarlyReturnInLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(3)
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
            if x.sum() > 1.0:
                return self.head(x)
            x = torch.tanh(x)
        return self.head(x * 2)


def test_early_return_in_loop():
    model = build(EarlyReturnInLoop)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 3
    assert checked.source.count("return ") == 4


class EarlyReturnInNestedIf(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 8)
        self.fc2 = nn.Linear(8, 8)
        self.fc3 = nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc1(x)
        if h.sum() > 0:
            if h.max() > 2.0:
                return h * 2
            h = h - 1
        else:
            h = self.fc2(h)
        return self.fc3(h)


def test_early_return_in_nested_if():
    model = build(EarlyReturnInNestedIf)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 2
    assert "return h * 2" in checked.source
    assert checked.source.count("self.fc3(") == checked.source.count("return self.fc3(")


class ElifChain(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        s = self.fc(x).sum()
        if s > 1:
            y = x * 3
        elif s > 0:
            y = x * 2
        elif s > -1:
            y = x + 1
        else:
            y = -x
        return y


def test_elif_chain():
    model = build(ElifChain)
    checked = check(model, randn_inputs(2, 8), min_paths=4)
    assert count_ifs(checked.tree) == 3
    assert "elif" not in checked.source


class BreakInNestedIf(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(3)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
            if x.sum() > 0:
                if x.max() > 2.0:
                    break
                x = x * 0.5
            else:
                x = -x
        return x


def test_break_in_nested_if_in_loop():
    model = build(BreakInNestedIf)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert set(called_indices(checked.source, "layers")) == {"0", "1", "2"}
    assert "x.max() > 2.0" in checked.source
    assert_no_static_ifs(checked.tree)


class LoopElseWithBreak(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(3)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
            if x.sum() > 1.5:
                break
            x = torch.tanh(x)
        else:
            x = x + 100
        return x


def test_loop_else_with_break():
    model = build(LoopElseWithBreak)
    checked = check(model, randn_inputs(2, 8), min_paths=3)
    assert count_ifs(checked.tree) == 3
    assert checked.source.count("x + 100") == 1


class NestedLoopsInnerBreak(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = _linears(6)

    def forward(self, x):
        for i in range(2):
            for j in range(3):
                x = self.layers[i * 3 + j](x)
                if x.sum() > 1.0:
                    break
                x = x * 0.9
            x = x + i
        return x


def test_nested_loops_with_inner_break():
    model = build(NestedLoopsInnerBreak)
    checked = check(model, randn_inputs(2, 8), min_paths=4)
    # the outer loop's second iteration follows every way out of the first inner loop
    assert "self.layers[3]" in checked.source and "self.layers[5]" in checked.source
    assert "x + 1" in checked.source and "x + 0" in checked.source


# -- early exits nested in inlined helpers (the DyCL authors' SDN pattern) -----------------------


class HeadBlock(nn.Module):
    """A block in the ShallowDeep style: returns ``(fwd, is_output, output)``,
    where ``is_output`` is a 0-d tensor and blocks without a head return zeros."""

    def __init__(self, width: int, add_output: bool) -> None:
        super().__init__()
        self.conv = nn.Linear(width, width)
        self.output = nn.Linear(width, 4) if add_output else None
        self.add_output = add_output

    def forward(self, x):
        fwd = torch.relu(self.conv(x)) + x
        if self.add_output:
            return fwd, torch.tensor(1), self.output(fwd)
        # x.shape[0], not len(x): the tracer keeps a size but freezes len() (refused for a symbolic batch)
        return fwd, torch.tensor(0), torch.zeros(x.shape[0], 4)


class ShallowDeepStyle(nn.Module):
    """``early_exit`` as the authors write it: a loop over blocks, a confidence
    test nested in ``if is_output:`` (a tensor), returns inside the loop; called
    from ``forward`` so it is inlined."""

    def __init__(self, heads=(0, 1, 1, 0, 1, 1, 0, 1)) -> None:
        super().__init__()
        self.layers = nn.ModuleList([HeadBlock(6, bool(h)) for h in heads])
        self.end_layers = nn.Linear(6, 4)
        self.confidence_threshold = 0.5

    def forward(self, x):
        return self.early_exit(x)

    def early_exit(self, x):
        outputs = []
        fwd = x
        output_id = 0
        for layer in self.layers:
            fwd, is_output, output = layer(fwd)
            if is_output:
                outputs.append(output)
                softmax = nn.functional.softmax(output[0], dim=0)
                confidence = torch.max(softmax)
                if confidence >= self.confidence_threshold:
                    return output + output_id, True
                output_id += is_output
        output = self.end_layers(fwd)
        # (the authors return output_id itself: a 0-d int tensor, which the host returns as shape (1,))
        return output + output_id, False


def test_shallow_deep_early_exit_nested_in_tensor_tests_stays_linear():
    model = build(ShallowDeepStyle)
    checked = check(model, randn_inputs(1, 6, count=40, scale=1.5), min_paths=3)
    # one returned-flag region: each head adds its two tests and one guard, nothing is copied
    assert checked.source.count("self.layers[7](") == 1
    assert count_ifs(checked.tree) <= 3 * len(model.layers)


def test_nested_exit_size_grows_linearly_with_blocks():
    from dycl import rewriter

    sizes = [rewriter.rewrite(build(ShallowDeepStyle, (1,) * n)).plain_source.count("\n") for n in (4, 8, 16)]
    assert sizes[2] - sizes[1] == 2 * (sizes[1] - sizes[0]), sizes


class GatedResidual(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        h = self.fc(x)
        if h.mean() > 0:
            return x + torch.relu(h)
        return x


class HelperLoopOverBlocks(nn.Module):
    """An inlined helper that loops over its own ModuleList: each block's ``if``
    must be inlined too (it was traced, frozen at the example's branch)."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([GatedResidual(6) for _ in range(3)])

    def forward(self, x):
        y = self.stage(x)
        return y * 2

    def stage(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def test_blocks_of_an_inlined_helpers_loop_are_inlined():
    model = build(HelperLoopOverBlocks)
    checked = check(model, randn_inputs(1, 6, count=40), min_paths=3)
    assert count_ifs(checked.tree) == 3
