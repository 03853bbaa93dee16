"""``benchmarks/batch.py``'s split of a batched call (``time_split``): the sub-DNN runs it
times are every run of the call, the host is given back its own callables, and the host
still gives each sample of a batch over three paths what eager gives it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from dycl.hcfg.levers import Levers

import dycl
from dycl.per_sample.testing import assert_per_sample, batch_of, diverse, paths_of
from tests.per_sample import nets

pytestmark = pytest.mark.filterwarnings("ignore")
SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "batch.py"


def _script():
    spec = importlib.util.spec_from_file_location("batch_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _CountingStatic:
    """A stand-in for the static network's session: counts its runs."""

    def __init__(self) -> None:
        self.runs = 0

    def run(self, names, feeds):
        self.runs += 1
        return []


def test_time_split_times_every_run_and_gives_the_host_back():
    model = nets.EarlyExitMLP().eval()
    samples = [torch.randn(1, 8, generator=torch.Generator().manual_seed(seed)) * 2 for seed in range(32)]
    compiled = dycl.compile(model, samples[0], per_sample=True, progress=False, optimize=Levers(predicate=False))
    chosen = [samples[i] for i in diverse(paths_of(model, samples), 12)]
    batch = batch_of(chosen)[0].numpy()
    host = compiled._host
    calls, variants = dict(host._call), {index: dict(v) for index, v in host._variants.items()}
    _, groups = host.route(batch)
    assert len(groups) >= 3  # the routed batch runs the stem, and each exit's sub-DNN on its group
    static = _CountingStatic()
    split = _script().time_split(host, [batch], static, {}, repeats=3)
    assert static.runs == 3
    assert split["runtime_ms"] > 0 and split["router_ms"] > 0
    assert split["runtime_ms"] + split["router_ms"] == pytest.approx(split["total_ms"])
    assert host._call == calls and {index: dict(v) for index, v in host._variants.items()} == variants
    assert assert_per_sample(model, compiled, chosen, min_paths=3, atol=1e-5) == 3


ROUTER_SCRIPT = SCRIPT.parent / "batch_router.py"


def _router_script():
    spec = importlib.util.spec_from_file_location("batch_router_benchmark", ROUTER_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class SkippingMLP(torch.nn.Module):
    """Residual blocks each run only where a learned gate says so (SkipNet's shape, as an MLP)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(5)
        self.blocks = torch.nn.ModuleList([torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
                                           for _ in range(3)])
        self.gates = torch.nn.ModuleList([torch.nn.Linear(8, 1) for _ in range(3)])
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x):
        for gate, block in zip(self.gates, self.blocks):
            if torch.sigmoid(gate(x)).item() > 0.5:
                x = x + block(x)
        return self.head(x)


@pytest.fixture(scope="module")
def skipping():
    model = SkippingMLP().eval()
    samples = [torch.randn(1, 8, generator=torch.Generator().manual_seed(seed)) * 2 for seed in range(48)]
    compiled = dycl.compile(model, samples[0], per_sample=True, progress=False, optimize=Levers(predicate=False))
    chosen = [samples[i] for i in diverse(paths_of(model, samples), 16)]
    return model, compiled, chosen


def test_router_ms_times_each_mode_on_replayed_runs_and_gives_the_host_back(skipping):
    model, compiled, chosen = skipping
    host = compiled._host
    host_globals = type(host).route.__globals__
    assert host_globals["GROUPED"]  # both modes of the router are timed
    batch = [batch_of(chosen)[0].numpy()]
    calls, when = dict(host._call), host_globals["GROUP_WHEN"]
    _, groups = host.route(*batch)
    timed = _router_script().router_ms(host, batch, rounds=3)
    assert timed["runs"] == len(groups) >= 4  # the gates' sub-DNNs on everyone, each block on its group
    assert all(timed[mode][1] > 0 for mode in ("per sample", "groups"))
    assert host._call == calls and host_globals["GROUP_WHEN"] == when
    assert assert_per_sample(model, compiled, chosen, min_paths=4, atol=1e-5) >= 4


def test_router_ms_refuses_a_replay_that_answers_otherwise(skipping, monkeypatch):
    _, compiled, chosen = skipping
    script = _router_script()
    played = script._Recording.player

    def shifted(self, *args):
        outputs = played(self, *args)
        return tuple(output + 1 if output.dtype.kind == "f" else output for output in outputs)

    monkeypatch.setattr(script._Recording, "player", shifted)
    with pytest.raises(RuntimeError, match="did not repeat"):
        script.router_ms(compiled._host, [batch_of(chosen)[0].numpy()], rounds=1)
