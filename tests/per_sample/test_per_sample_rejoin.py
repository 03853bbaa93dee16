"""If-conversion of gates whose branches rejoin (``dycl.per_sample.rejoin``): a chain of
``if gate: x = block(x)`` becomes one sub-DNN that computes every block on the whole group
and selects each sample's value by its own test, computed in the graph exactly as the host
decides it (``dycl.per_sample.graph_test``). Every batch equals eager per sample, in process
and through the saved torch-free host; what cannot be proven stays routed and still agrees."""

from __future__ import annotations

import libcst as cst
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from dycl.hcfg.graph import source_of
from dycl.hcfg.levers import Levers
from torch import nn

import dycl
from dycl.per_sample.graph_test import in_graph
from dycl.per_sample.testing import assert_per_sample, diverse, paths_of, saved_host_report

ATOL = 1e-5
pytestmark = pytest.mark.filterwarnings("ignore")


class GatedResidualNet(nn.Module):
    """SkipNet-style: each residual block runs only where its gate says so (``.item()``
    against a threshold that float32 cannot hold exactly)."""

    def __init__(self, width: int = 8, blocks: int = 3) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, padding=1)
        self.blocks = nn.ModuleList(nn.Sequential(nn.Conv2d(width, width, 3, padding=1), nn.BatchNorm2d(width),
                                                  nn.ReLU()) for _ in range(blocks))
        self.gates = nn.ModuleList(nn.Linear(width, 1) for _ in range(blocks))
        self.head = nn.Linear(width, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.stem(x))
        for block, gate in zip(self.blocks, self.gates):
            if torch.sigmoid(gate(x.mean(dim=(2, 3)))).item() > 0.45:
                x = x + block(x)
        return self.head(x.mean(dim=(2, 3)))

    @torch.no_grad()
    def calibrate(self, images: list[torch.Tensor]) -> None:
        """Each gate's bias set so that half of ``images`` run its block (gate by gate, on their paths)."""
        features = [F.relu(self.stem(image)) for image in images]
        for block, gate in zip(self.blocks, self.gates):
            scores = torch.cat([gate(x.mean(dim=(2, 3))) for x in features]).flatten()
            gate.bias -= scores.median() - torch.logit(torch.tensor(0.45))
            features = [x + block(x) if torch.sigmoid(gate(x.mean(dim=(2, 3)))).item() > 0.45 else x
                        for x in features]


class SkipLoop(nn.Module):
    """An MLP whose layers are skipped with ``continue`` where a policy scores them low, a
    binary mask compared with ``==`` as SkipNet does, and a block that keeps the old value."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(6, 6)
        self.layers = nn.ModuleList(nn.Linear(6, 6) for _ in range(3))
        self.policy = nn.Linear(6, 1)
        self.out = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.embed(x))
        for layer in self.layers:
            mask = (self.policy(h) > 0).float()
            if mask.item() == 0:
                continue
            prev = h
            h = torch.tanh(layer(h)) + prev
        return self.out(h)


class ChainedRange(nn.Module):
    """``if 0 < s < 2``: Python tests the second comparison only where the first holds, so the
    test itself is a bool that one branch rewrites (selected by logic: no bool ``Where``)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x)
        if 0 < h.sum() < 2:
            h = torch.tanh(h) * 3
        return h * 2


class InexactEquality(nn.Module):
    """``v.item() == 0.1``: no float32 equals 0.1, so the graph cannot decide it as the host: routed."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x)
        if h.mean().item() == 0.1:
            h = h * 2
        return h + 1


def _model(cls: type[nn.Module], samples: list[torch.Tensor] | None = None) -> nn.Module:
    torch.manual_seed(0)
    model = cls().eval()
    if hasattr(model, "calibrate"):
        model.calibrate(samples)
    return model


def _longest(model: nn.Module, samples: list[torch.Tensor]) -> torch.Tensor:
    """The sample whose eager path is longest (it runs every block): the example to compile with,
    since a gate converts where the build's run went through its block (``dycl.per_sample.value_flow``)."""
    paths = paths_of(model, samples)
    return samples[max(range(len(samples)), key=lambda i: len(paths[i]))]


def _images(count: int) -> list[torch.Tensor]:
    return [torch.randn(1, 3, 10, 10, generator=torch.Generator().manual_seed(s)) * (0.3 + s % 4) for s in range(count)]


def _vectors(count: int) -> list[torch.Tensor]:
    return [torch.randn(1, 6, generator=torch.Generator().manual_seed(200 + s)) * 1.5 for s in range(count)]


@pytest.fixture(scope="module", params=[(GatedResidualNet, _images), (SkipLoop, _vectors)], ids=["gated", "loop"])
def gated(request, tmp_path_factory):
    cls, samples = request.param
    inputs = samples(64)
    model = _model(cls, inputs)
    example = _longest(model, inputs)
    compiled = dycl.compile(model, example, per_sample=True, progress=False)
    routed = dycl.compile(model, example, per_sample=True, progress=False, optimize=Levers(predicate=False))
    artifact = compiled.save(tmp_path_factory.mktemp("rejoin") / cls.__name__)
    return model, compiled, routed, inputs, artifact


def test_a_chain_of_gates_becomes_one_sub_dnn(gated):
    _, compiled, routed, *_ = gated
    assert compiled.stats["per_sample"] == {"predicated_conditions": 3, "routed_conditions": 0}
    assert compiled.stats["sub_dnns"] == 1
    assert routed.stats["per_sample"] == {"predicated_conditions": 0, "routed_conditions": 3}
    assert routed.stats["sub_dnns"] > 3


def test_batches_over_many_paths_equal_eager_per_sample(gated):
    model, compiled, routed, inputs, _ = gated
    paths = paths_of(model, inputs)
    assert len(set(paths)) >= 4
    for start in range(0, 64, 16):  # four batches, each over at least 2 paths
        batch = inputs[start:start + 16]
        assert assert_per_sample(model, compiled, batch, min_paths=2, atol=ATOL) >= 2
        assert assert_per_sample(model, routed, batch, min_paths=2, atol=ATOL) >= 2
    chosen = [inputs[i] for i in diverse(paths, 32)]
    assert assert_per_sample(model, compiled, chosen, min_paths=4, atol=ATOL) == len(set(paths))


def test_the_saved_host_agrees_without_torch(gated):
    model, _, _, inputs, artifact = gated
    report = saved_host_report(artifact, model, inputs, inputs[5], atol=ATOL)
    assert report == {"checked": 2, "problems": [], "torch_loaded": False}


def test_the_gates_become_selections_in_their_own_names():
    images = _images(64)
    model = _model(GatedResidualNet, images)
    compiled = dycl.compile(model, _longest(model, images), per_sample=True, progress=False)
    (converted,) = compiled.graph.sub_dnns
    lines = [source_of(statement.body[0]) for statement in converted.statements]
    assert lines[:5] == [
        "x = F.relu(self.stem(x))",
        "t = torch.sigmoid(self.gates[0](x.mean(dim=(2, 3))))",
        # 0.45 is no float32: its neighbour below decides `>` as the host's double does
        "_dycl_selected_gate_3 = (t > 0.44999998807907104)",
        "x_3 = x + self.blocks[0](x)",
        # the test's sample dim stays dim 0: each row of the group selects its own
        "x = x_3.where(_dycl_selected_gate_3.reshape(1, 1, 1, 1), x)",
    ]
    assert lines[-1] == "t_3 = self.head(x.mean(dim=(2, 3)))" and len(lines) == 14


def test_a_chained_comparison_selects_its_bool_by_logic(tmp_path):
    model = _model(ChainedRange)
    vectors = _vectors(48)
    compiled = dycl.compile(model, vectors[0], per_sample=True, progress=False)
    assert compiled.stats["per_sample"] == {"predicated_conditions": 2, "routed_conditions": 0}
    selections = [source_of(s.body[0]) for sub in compiled.graph.sub_dnns for s in sub.statements
                  if " | ~" in source_of(s.body[0])]
    assert len(selections) == 1
    sums = [float(model.proj(v).sum()) for v in vectors]
    assert {(s <= 0, 0 < s < 2, s >= 2) for s in sums} == {(True, False, False), (False, True, False),
                                                            (False, False, True)}  # all three ranges
    assert assert_per_sample(model, compiled, vectors, min_paths=2, atol=ATOL) == 2
    report = saved_host_report(compiled.save(tmp_path / "chained"), model, vectors, vectors[2], atol=ATOL)
    assert report == {"checked": 2, "problems": [], "torch_loaded": False}


def test_gates_whose_blocks_cost_more_than_their_runs_stay_routed():
    images = _images(32)
    torch.manual_seed(0)
    model = GatedResidualNet(width=24).eval()  # about 0.5 M multiply-accumulates per sample and gate
    model.calibrate(images)
    compiled = dycl.compile(model, _longest(model, images), per_sample=True, progress=False)
    counts = compiled.stats["per_sample"]
    assert (counts["predicated_conditions"], counts["routed_conditions"]) == (0, 3)
    assert "per sample and rejoining gate" in counts["predication_declined"]
    assert assert_per_sample(model, compiled, images, min_paths=3, atol=ATOL) >= 3


def test_an_equality_float32_cannot_decide_stays_routed():
    model = _model(InexactEquality)
    vectors = _vectors(16)
    vectors[3] = torch.linalg.lstsq(model.proj.weight, (torch.full((6,), 0.1) - model.proj.bias)[:, None]).solution.T
    compiled = dycl.compile(model, vectors[0], per_sample=True, progress=False)
    assert compiled.stats["per_sample"] == {"predicated_conditions": 0, "routed_conditions": 1}
    assert assert_per_sample(model, compiled, vectors, min_paths=1, atol=ATOL) >= 1


@pytest.mark.parametrize("constant", [0.8, 0.1, 0.5, -0.3, 1e-3, 0, 3])
@pytest.mark.parametrize("operator", [">", ">=", "<", "<=", "==", "!="])
def test_the_graph_test_decides_every_float32_as_the_host(operator, constant):
    test = cst.parse_expression(f"v.item() {operator} {constant!r}")
    source = in_graph(test, torch.zeros((), dtype=torch.float32))
    exact = float(np.float32(constant)) == constant
    if operator in ("==", "!=") and not exact:
        assert source is None  # nothing proven: the condition stays routed
        return
    assert source is not None
    nearest = np.float32(constant)
    around = [nearest]
    for _ in range(3):
        around += [np.nextafter(around[-1], np.float32(np.inf))]
    around += [np.nextafter(nearest, np.float32(-np.inf)), np.nextafter(np.nextafter(nearest, np.float32(-1e9)),
                                                                        np.float32(-np.inf)), np.float32(np.nan)]
    for value in around:
        names = {"v": torch.tensor(value, dtype=torch.float32)}
        host = eval(f"v.item() {operator} {constant!r}", names)  # the host's double comparison
        assert bool(eval(source, names)) == host, (value, source)
