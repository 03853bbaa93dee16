"""How long the rewriter takes on models with many unrolled blocks.

    python benchmarks/rewrite_time.py [--blocks 100] [--repeat 7] [--out benchmarks/rewrite_results.md]

Four shapes of model, each with ``--blocks`` blocks: a BlockDrop-style loop over
a ModuleList with a data-dependent skip per block, a SkipNet-style loop whose
gate is a submodule with its own ``if`` (inlined once per block), an SDN-style
loop with an early exit per block, and NestedExits: an inlined ``early_exit``
method returning from inside ``if <tensor>: if <tensor>:`` per block, each block
calling two sub-blocks that return early too (four exits per block, two calls
deep; rewritten size used to double per block) — built with ``--blocks // 4``
blocks, so that it has ``--blocks`` exits (each flagged exit nests its rest one
level deeper, and nesting is capped at 90 levels). Reports the median wall time.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

import torch
import torch.nn as nn

from dycl import rewriter


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(width, width, 3, padding=1)
        self.bn = nn.BatchNorm2d(width)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)) + x)


class BlockDrop(nn.Module):
    def __init__(self, blocks: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(4) for _ in range(blocks)])
        self.policy = nn.Linear(4, blocks)

    def forward(self, x):
        probs = torch.sigmoid(self.policy(x.mean((2, 3))))
        policy = (probs > 0.5).float()
        for t, block in enumerate(self.blocks):
            if policy[0, t].item() == 1:
                x = block(x)
        return x


class Gate(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc = nn.Linear(width, 1)

    def forward(self, x):
        prob = torch.sigmoid(self.fc(x.mean((2, 3))))
        if prob.item() > 0.5:
            return 1
        return 0


class SkipNet(nn.Module):
    def __init__(self, blocks: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(4) for _ in range(blocks)])
        self.gates = nn.ModuleList([Gate(4) for _ in range(blocks)])

    def forward(self, x):
        executed = 0
        for i in range(len(self.blocks)):
            if self.gates[i](x) == 1:
                x = self.blocks[i](x)
                executed += 1
        return x, executed


class ShallowDeep(nn.Module):
    def __init__(self, blocks: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(4) for _ in range(blocks)])
        self.heads = nn.ModuleList([nn.Linear(4, 10) for _ in range(blocks)])
        self.threshold = 0.9

    def forward(self, x):
        for block, head in zip(self.blocks, self.heads):
            x = block(x)
            logits = head(x.mean((2, 3)))
            if torch.softmax(logits, 1).max().item() > self.threshold:
                return logits
        return logits


class _Sub(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        h = self.fc(x.mean((2, 3)))
        if h.mean() > 0.3:
            return x * torch.tanh(h)[:, :, None, None]
        return torch.relu(x)


class _ExitBlock(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.first, self.second = _Sub(width), _Sub(width)
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        y = self.first(x)
        if y.abs().amax() > 4.0:
            return y, self.head(y.mean((2, 3)))
        y = self.second(y)
        return y, self.head(y.mean((2, 3)))


class NestedExits(nn.Module):
    def __init__(self, blocks: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([_ExitBlock(4) for _ in range(max(1, blocks // 4))])
        self.threshold = 0.9

    def forward(self, x):
        return self.early_exit(x)

    def early_exit(self, x):
        for block in self.blocks:
            x, logits = block(x)
            if logits.sum() > 0:  # noqa: SIM102 - the nested-exit shape is the point
                if torch.softmax(logits, 1).max() > self.threshold:
                    return logits
        return logits


def median_seconds(model: nn.Module, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        rewriter.rewrite(model)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("rewrite_results.md"))
    args = parser.parse_args()
    rows = []
    for model_class in (BlockDrop, SkipNet, ShallowDeep, NestedExits):
        model = model_class(args.blocks).eval()
        seconds = median_seconds(model, args.repeat)
        lines = rewriter.rewrite(model).plain_source.count("\n")
        rows.append((model_class.__name__, seconds, lines))
        print(f"{model_class.__name__:12s} {args.blocks} blocks: {seconds * 1000:7.1f} ms median, {lines} lines")
    report = [
        "# Rewriter time",
        "",
        f"Command: `python benchmarks/rewrite_time.py --blocks {args.blocks} --repeat {args.repeat}`",
        f"Machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads, "
        f"Python {platform.python_version()}",
        "",
        "| model | blocks | median rewrite time (ms) | rewritten lines |",
        "|---|---|---|---|",
        *[f"| {name} | {args.blocks} | {seconds * 1000:.1f} | {lines} |" for name, seconds, lines in rows],
        "",
    ]
    args.out.write_text("\n".join(report))


if __name__ == "__main__":
    main()
