"""One symbolic run serves the sub-DNNs that compute the same shapes (``hcfg.shared_runs``).

The run key is checked directly (equal for blocks of one structure, different where a
width, a configuration attribute or an input shape differs, absent for what structure
cannot describe), and the explore stage is run with and without sharing: every sub-DNN
gets the same symbolic shapes either way, and compiled models still match eager across
paths and batch sizes.
"""

from __future__ import annotations

import libcst as cst
import pytest
import torch
from dycl.hcfg import trace
from dycl.hcfg.shared_runs import run_key
from torch import nn

import dycl
from dycl import compiler
from dycl.backends import get_backend
from dycl.harness.testing import assert_equivalent
from dycl.progress import Progress


class Block(nn.Module):
    def __init__(self, channels: int, scale: float = 1.0) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.norm = nn.BatchNorm2d(channels)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.norm(self.conv(x))) * self.scale


class Widen(nn.Module):
    """Changes the channel count: same class, other parameter shapes."""

    def __init__(self, channels: int, out: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, out, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


class GatedStack(nn.Module):
    """Blocks skipped by a per-input gate, the way skip/drop networks are written."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.stage1 = nn.ModuleList([Block(8) for _ in range(4)])
        self.widen = nn.ModuleList([Widen(8, 8), Widen(8, 16)])
        self.stage2 = nn.ModuleList([Block(16), Block(16, scale=0.5), Block(16)])
        self.head = nn.Linear(16, 5)
        self.thresholds = [-0.4, -0.1, 0.1, 0.4]

    @property
    def first_block(self) -> nn.Module:
        return self.stage1[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        level = x.mean()
        x = self.stem(x)
        for block, threshold in zip(self.stage1, self.thresholds):
            if level > threshold:
                x = x + block(x)
        for widen in self.widen:
            x = widen(x)
        for i, block in enumerate(self.stage2):
            if level < self.thresholds[i + 1]:
                x = block(x)
        return self.head(x.mean(dim=(2, 3)))


def _statement(text: str) -> cst.SimpleStatementLine:
    return cst.parse_statement(text)


def test_blocks_of_one_structure_share_a_key():
    model = GatedStack().eval()
    state = {"self": model}
    keys = [run_key([_statement(f"x = x + self.stage1[{i}](x)\n")], state, frozenset({"x"}), {}) for i in range(4)]
    assert keys[0] is not None and len(set(keys)) == 1


def test_what_structure_or_text_tells_apart_gets_another_key():
    model = GatedStack().eval()
    state = {"self": model, "torch": torch}
    names = frozenset({"x", "y"})

    def key(text: str) -> tuple | None:
        return run_key([_statement(text)], state, names, {})

    widths = key("x = self.widen[0](x)\n"), key("x = self.widen[1](x)\n")  # 8 -> 8 and 8 -> 16 channels
    scales = key("x = self.stage2[0](x)\n"), key("x = self.stage2[1](x)\n"), key("x = self.stage2[2](x)\n")
    assert widths[0] != widths[1]
    assert scales[0] != scales[1] and scales[0] == scales[2]  # scale=0.5 is configuration
    assert key("x = self.stage1[0](y)\n") != key("x = self.stage1[0](x)\n")  # another input
    assert key("x = torch.relu(self.stage1[0](x))\n") != key("x = self.stage1[0](x)\n")
    assert key("n = self.stage2[1].scale\n") != key("n = self.stage2[0].scale\n")  # literals by value
    assert key("x = self.forward(x)\n") is None  # a bound method: not described by structure
    assert key("x = self.missing(x)\n") is None
    assert key("x = self.first_block(x)\n") is None  # a property: looking it up runs user code


def _explore(model: nn.Module, example: torch.Tensor) -> compiler.Explored:
    options = compiler.Options()
    value = compiler.Job(model, (example,), options, get_backend(options.backend), Progress("", 3, False))
    for _, stage in compiler.STAGES[:4]:
        value = stage(value)
    return value


def _symbolic_shapes(explored: compiler.Explored) -> dict[int, tuple]:
    return {index: (tuple(map(str, examples.symbolic_inputs)), tuple(map(str, examples.symbolic_outputs)))
            for index, examples in explored.examples.items()}


@pytest.mark.parametrize("build", [GatedStack, "blockdrop"])
def test_sharing_gives_every_sub_dnn_the_shapes_its_own_run_gives(build, monkeypatch):
    if build == "blockdrop":
        from models import blockdrop

        model, example = blockdrop.build()
    else:
        torch.manual_seed(0)
        model, example = build().eval(), torch.randn(2, 3, 8, 8)
    shared = _explore(model, example)
    monkeypatch.setattr(trace, "run_key", lambda *args: None)
    alone = _explore(model, example)
    assert _symbolic_shapes(shared) == _symbolic_shapes(alone)
    assert shared.shapes.proven == alone.shapes.proven
    ran = len(shared.shapes._shared)  # one entry per run made for a key; the others were shared
    assert 0 < ran < sum(1 for examples in shared.examples.values() if examples.symbolic_outputs) - 2


def test_gated_stack_compiles_to_eager_across_paths_and_batch_sizes():
    torch.manual_seed(0)
    model = GatedStack().eval()
    generator = torch.Generator().manual_seed(3)
    inputs = [torch.randn(batch, 3, 8, 8, generator=generator) + shift
              for batch in (1, 2, 5) for shift in (-0.6, -0.2, 0.0, 0.2, 0.6) for _ in range(2)]
    compiled = dycl.compile(model, inputs[0])
    assert assert_equivalent(model, compiled, inputs, min_paths=4, atol=1e-4) >= 4
