"""The static whole networks ``benchmarks/batch.py`` compares per-sample batching with
(``every_branch`` of the gated zoo models): with every gate forced open, the dynamic model runs
every block, and the static network must give exactly what it gives; with the model as built,
it runs blocks the dynamic model skips for these samples."""

from __future__ import annotations

import copy
import importlib

import pytest
import torch


def _open_every_gate(name: str, model: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``model`` whose gates (SkipNet) or policy (BlockDrop) say "run" for every input."""
    model = copy.deepcopy(model)
    with torch.no_grad():
        if name == "skipnet_ff":
            for module in model.modules():
                if type(module).__name__ == "FeedforwardGate":
                    module.linear.bias.fill_(100.0)
        elif name == "skipnet_rnn":
            model.control.proj.bias.fill_(100.0)
        else:
            model.agent.linear.bias.fill_(100.0)
    return model


@pytest.mark.parametrize("name", ["skipnet_ff", "skipnet_rnn", "blockdrop"])
def test_every_branch_is_the_model_with_every_gate_open(name):
    zoo = importlib.import_module(f"models.{name}")
    model, _ = zoo.build()
    opened = _open_every_gate(name, model)
    static = zoo.every_branch(opened).eval()
    samples = [zoo.sample(seed) for seed in range(4)]
    with torch.no_grad():
        for sample in samples:
            eager = opened(sample)
            logits, decisions = static(sample)
            torch.testing.assert_close(logits, eager[0], rtol=1e-5, atol=1e-5)
            if name == "skipnet_rnn":
                assert eager[1] == 18  # every block ran
                assert bool((decisions == 1).all())
            else:
                assert torch.equal(decisions, eager[1]) and bool((decisions == 1).all())
        # the model as built skips blocks on these samples, which the static network runs
        ran = []
        for sample in samples:
            out = model(sample)
            ran.append(out[1] if name == "skipnet_rnn" else int(out[1].sum()))
        full = 18 if name == "skipnet_rnn" else zoo.every_branch(model)(samples[0])[1].numel()
        assert max(ran) < full
