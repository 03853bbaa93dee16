"""How long the rewriter takes on models with many unrolled blocks.

    python benchmarks/rewrite_time.py [--blocks 100] [--repeat 7] [--out benchmarks/rewrite_results.md]

Three shapes of model, each with ``--blocks`` blocks: a BlockDrop-style loop over
a ModuleList with a data-dependent skip per block, a SkipNet-style loop whose
gate is a submodule with its own ``if`` (inlined once per block), and an
SDN-style loop with an early exit per block. Reports the median wall time.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

import torch
import torch.nn as nn

import rewriter


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
    for model_class in (BlockDrop, SkipNet, ShallowDeep):
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
