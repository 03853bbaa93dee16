"""Early exits nested in inlined helpers and submodules compile to code that
grows linearly with the number of exits (issue 14, item 5).

The network: ``forward`` calls an SDN-style ``early_exit`` method that loops
over blocks; each block calls two sub-blocks, and each of the three may
``return`` early on a tensor test; ``early_exit`` itself returns from inside
``if <tensor>: if <tensor>:`` (the pattern that used to copy the rest of the
loop into both fall-through branches, doubling the code per block).
"""

from __future__ import annotations

import time

import torch
from torch import nn

import dycl
from dycl import rewriter
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch


class SubBlock(nn.Module):
    def __init__(self, width: int, threshold: float) -> None:
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.threshold = threshold

    def forward(self, x):
        h = self.fc(x)
        if h.mean() > self.threshold:
            return torch.tanh(h)
        return torch.relu(h) + x


class Block(nn.Module):
    def __init__(self, width: int, classes: int) -> None:
        super().__init__()
        self.first = SubBlock(width, 0.3)
        self.second = SubBlock(width, -0.3)
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        y = self.first(x)
        if y.abs().amax() > 4.0:
            return y, self.head(y)
        y = self.second(y)
        return y, self.head(y)


class NestedExitNet(nn.Module):
    def __init__(self, blocks: int, width: int = 8, classes: int = 5) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(width, classes) for _ in range(blocks)])
        self.final = nn.Linear(width, classes)
        self.confidence_threshold = 0.6

    def forward(self, x):
        return self.early_exit(x)

    def early_exit(self, x):
        fwd = x
        for block_id, block in enumerate(self.blocks):
            fwd, output = block(fwd)
            if output.sum() > 0:
                confidence = torch.softmax(output, dim=1).max()
                if confidence >= self.confidence_threshold:
                    return output, block_id
        return self.final(fwd), len(self.blocks)


def exits_in(model: NestedExitNet) -> int:
    """``return``s the compiled paths can take before the last: three per block
    (two sub-blocks and the block itself) plus ``early_exit``'s own per block."""
    return 4 * len(model.blocks)


def rewritten_lines(blocks: int) -> int:
    torch.manual_seed(0)
    return rewriter.rewrite(NestedExitNet(blocks).eval()).plain_source.count("\n")


def test_rewritten_source_grows_linearly_with_nested_exits():
    small, double = rewritten_lines(10), rewritten_lines(20)
    # copying the rest of the loop into both fall-through branches doubled the
    # code per block (2**20 copies at 20 blocks); each block now adds the same lines
    assert double - small <= small + 20, (small, double)
    # per exit: the sub-block's if/else (4 lines) and its call site, the block's
    # guard, head and return writes, and early_exit's two tests, the result and
    # flag writes and the guard: about 6 lines per exit, well under 8
    assert double <= 8 * exits_in(NestedExitNet(20)), double


def test_sixty_nested_exits_compile_in_seconds_and_agree_with_eager(tmp_path):
    torch.manual_seed(0)
    model = NestedExitNet(15).eval()
    assert exits_in(model) == 60
    generator = torch.Generator().manual_seed(3)
    inputs = [torch.randn(1, 8, generator=generator) * scale for scale in (0.5, 1.0, 2.0, 4.0) for _ in range(8)]
    start = time.perf_counter()
    compiled = dycl.compile(model, inputs[0], dynamic=False)
    seconds = time.perf_counter() - start
    # about 20 s on a loaded 2-core machine; before, 2**15 copies of the loop's tail never finished
    assert seconds < 90, f"compiling took {seconds:.1f} s"
    # the graph too is linear: per exit at most one test of data and one of the flag,
    # and about 14 host lines (three sub-DNN calls, two tests, the flag and result writes)
    assert len(compiled.graph.conditions) <= 2 * exits_in(model)
    assert _forward_lines(compiled.host_source) <= 16 * exits_in(model)
    paths = assert_equivalent(model, compiled, inputs, min_paths=8, atol=1e-4)
    assert paths >= 8  # 12 distinct eager paths over these 32 inputs
    report = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, inputs, 1e-4)
    assert report["checked"] == len(inputs) and report["problems"] == [], report


def _forward_lines(host_source: str) -> int:
    """Lines of the generated ``_forward`` (the host's fixed template is not counted)."""
    lines = host_source.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("def _forward("))
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].strip() and len(lines[i]) - len(lines[i].lstrip()) <= indent), len(lines))
    return end - start
