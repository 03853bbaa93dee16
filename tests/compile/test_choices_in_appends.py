"""A conditional expression on a data-dependent test inside the call that appends its value
(``hidden_states.append(layer(h) if gate(h) > 0 else h)``), the way encoders that skip layers
collect their hidden states: the choice is a branch of the HCFG (``rewriter.choices`` lifts it
before the append, whose arguments Python evaluates before the list changes), not a decision
frozen into one exported graph. Compiled output equals eager on inputs that take every
combination of skipped layers, in process and as a torch-free host."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host

pytestmark = pytest.mark.filterwarnings("ignore")


class LayerSkippingEncoder(nn.Module):
    """Each layer runs where its gate on the current hidden state fires; every hidden state kept."""

    def __init__(self, dim: int = 6, depth: int = 3) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Sequential(nn.Linear(dim, dim), nn.Tanh()) for _ in range(depth)])
        self.gates = nn.ModuleList([nn.Linear(dim, 1) for _ in range(depth)])

    def skipped(self, x):
        h, skipped = x, []
        for layer, gate in zip(self.layers, self.gates):
            fires = bool(gate(h).mean() > 0)
            skipped.append(not fires)
            h = layer(h) if fires else h
        return tuple(skipped)

    def forward(self, x):
        all_hidden_states = []
        h = x
        for layer, gate in zip(self.layers, self.gates):
            all_hidden_states.append(layer(h) if gate(h).mean() > 0 else h)
            h = all_hidden_states[-1]
        return h, torch.stack(all_hidden_states)


class BeamScores(nn.Module):
    """Per step, the score kept is the better of two heads' (chosen on the host), appended to a running list."""

    def __init__(self) -> None:
        super().__init__()
        self.left, self.right = nn.Linear(4, 4), nn.Linear(4, 4)

    def picks(self, x):
        picked = []
        for _ in range(2):
            a, b = self.left(x), self.right(x)
            picked.append(bool(a.max() > b.max()))
            x = x + (a.softmax(-1) if picked[-1] else b.softmax(-1))
        return tuple(picked)

    def forward(self, x):
        scores = []
        for _ in range(2):
            a, b = self.left(x), self.right(x)
            scores.append(a.softmax(-1) if a.max() > b.max() else b.softmax(-1))
            x = x + scores[-1]
        return torch.cat(scores, dim=-1)


def _inputs(shape: tuple[int, ...], count: int, seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator) * 2 for _ in range(count)]


def test_hidden_states_of_skipped_layers_appended(tmp_path):
    torch.manual_seed(3)
    model = LayerSkippingEncoder().eval()
    inputs = _inputs((2, 6), 40, seed=1)
    with torch.no_grad():
        combinations = {model.skipped(x) for x in inputs}
    assert len(combinations) >= 4  # (one line holds each choice: eager's line trace sees one path)
    assert_agrees_in_process_and_as_host(model, inputs, tmp_path, 1e-5)


def test_the_better_heads_scores_appended_per_step(tmp_path):
    torch.manual_seed(0)
    model = BeamScores().eval()
    inputs = _inputs((3, 4), 30, seed=2)
    with torch.no_grad():
        assert len({model.picks(x) for x in inputs}) >= 3
    assert_agrees_in_process_and_as_host(model, inputs, tmp_path, 1e-5)
