"""Python values between compiled parts (issue 15, item 2): lists, tuples and dicts of
tensors, devices and dtypes, namedtuples and dataclasses cross from one sub-DNN to
the next and through joins, in-process and in the torch-free host. Each model is
written the way people write PyTorch code and branches on data; each test counts
the eager paths its inputs take."""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch

ATOL = 1e-5


class TwoViews(nn.Module):
    """A helper returns ``(h, [a, b])``; the list crosses a branch and is returned."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(6, 6)

    def encode(self, x):
        h = self.proj(x)
        return h, [F.relu(h), torch.sigmoid(h)]

    def forward(self, x):
        h, views = self.encode(x)
        if h.mean() > 0:
            out = views[0] * 2 + h
        else:
            out = views[1] - h
        return out, views


class FeatureDict(nn.Module):
    """A dict of features, updated on one branch or the other, read after the join."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(6, 6)
        self.head = nn.Linear(6, 3)

    def features(self, x):
        h = self.stem(x)
        return {"low": h, "high": torch.tanh(h), "gate": h.sum(-1, keepdim=True)}

    def forward(self, x):
        feats = self.features(x)
        if feats["gate"].mean() > 0:
            feats["high"] = feats["high"] + feats["low"]
        else:
            feats["low"] = feats["low"] * 0.5
        return self.head(feats["low"] + feats["high"]), feats


class DeviceAndDtype(nn.Module):
    """``device = x.device`` and ``dtype = x.dtype`` reach tensor constructors on two branches."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x):
        device, dtype = x.device, x.dtype
        h = self.fc(x)
        if h.sum() > 0:
            bias = torch.ones(h.shape[-1], device=device, dtype=dtype)
        else:
            bias = torch.arange(h.shape[-1], device=device).to(dtype)
        return h + bias


@dataclass
class DecoderState:
    hidden: torch.Tensor
    steps: int = 0


class Ponder(nn.Module):
    """An adaptive-computation loop over a dataclass state: each step halves the state
    while its norm is large and counts the steps taken."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.Linear(6, 6)

    def forward(self, x):
        state = DecoderState(self.cell(x))
        for _ in range(3):
            if state.hidden.norm() > 1.2:
                state = DecoderState(torch.tanh(self.cell(state.hidden)) * 0.9, state.steps + 1)
        return state.hidden, state.steps


Stats = namedtuple("Stats", ["mean", "spread"])


class Normalise(nn.Module):
    """A helper returns a namedtuple; its fields are read after a branch."""

    def stats(self, x):
        return Stats(x.mean(-1, keepdim=True), x.std(-1, keepdim=True))

    def forward(self, x):
        s = self.stats(x)
        if s.spread.mean() > 1.0:
            y = (x - s.mean) / s.spread
        else:
            y = x - s.mean
        return y, s.spread


class Pyramid(nn.Module):
    """A list built by a static ``for`` over layers, changed on one branch and returned."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(6, 6) for _ in range(3)])

    def forward(self, x):
        outs = []
        for layer in self.layers:
            x = torch.relu(layer(x))
            outs.append(x)
        if x.sum() > 0.5:
            outs[0] = outs[0] + x
        return outs


class Levels(nn.Module):
    """Nested: a helper returns a dict holding a list of pairs; the host packs part of it
    with a Python number into an options dict that a branch reads."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(6, 6)
        self.b = nn.Linear(6, 6)

    def levels(self, x):
        h = self.a(x)
        g = self.b(h)
        return {"levels": [(h, torch.relu(h)), (g, torch.relu(g))], "pooled": g.mean(0)}

    def forward(self, x):
        out = self.levels(x)
        opts = {"scale": 3, "levels": out["levels"]}
        if out["pooled"].sum() > 0:
            y = opts["levels"][1][1] * opts["scale"]
        else:
            y = opts["levels"][0][0] - opts["scale"]
        return y, out


CASES = {
    "helper returning (h, [a, b])": (TwoViews, 2),
    # compiled at the example's shapes after the self-check (see below)
    "dict of features across a branch": (FeatureDict, 2),
    "device and dtype across a branch": (DeviceAndDtype, 2),
    "dataclass state in a loop": (Ponder, 4),
    "namedtuple from a helper": (Normalise, 2),
    "list from a static for, returned": (Pyramid, 2),
    "nested dict of a list of pairs, and a number": (Levels, 2),
}


def _inputs(scale: float = 1.0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(7)
    return [torch.randn(2, 6, generator=generator) * scale * (0.2 + i / 10) for i in range(24)]


@pytest.mark.parametrize("name", list(CASES))
def test_structured_values_agree_in_process_and_in_the_torch_free_host(name, tmp_path):
    cls, paths = CASES[name]
    torch.manual_seed(0)
    model = cls().eval()
    inputs = _inputs()
    compiled = dycl.compile(model, inputs[0])
    assert assert_equivalent(model, compiled, inputs, min_paths=paths, atol=ATOL) == paths
    report = run_host_without_torch(compiled.save(tmp_path / "net"), model, inputs, ATOL)
    assert report["problems"] == [] and report["checked"] == len(inputs), report
    assert not report["torch_loaded"]


@pytest.mark.parametrize("cls", [FeatureDict, Ponder], ids=["dict", "dataclass"])
def test_a_dict_or_a_dataclass_keeps_its_symbolic_batch_across_sub_dnns(cls, tmp_path):
    """Was a known bug: the dict the helper returns (the dataclass the loop carries) lost its
    symbolic batch in the explore stage (mirrors walked lists and tuples only), so dycl compiled
    the example's batch alone. They are mirrored field by field now (``hcfg.mirror_structures``)."""
    torch.manual_seed(0)
    model = cls().eval()
    compiled = dycl.compile(model, _inputs()[0])
    assert compiled.manifest.dynamic_dims
    generator = torch.Generator().manual_seed(3)
    inputs = [torch.randn(batch, 6, generator=generator) * (0.2 + i / 10) for i, batch in enumerate((3, 1, 5) * 4)]
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=ATOL) >= 2
    report = run_host_without_torch(compiled.save(tmp_path / "net"), model, inputs, ATOL)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


def test_a_sub_dnn_returns_a_list_and_a_dict_the_host_rebuilds():
    for cls, kind in ((TwoViews, "list"), (FeatureDict, "dict")):
        torch.manual_seed(0)
        compiled = dycl.compile(cls().eval(), _inputs()[0])
        assert "build_values(self._call[0](x), PORT_TREES[0][1])" in compiled.host_source, cls
        assert f"['{kind}'," in compiled.host_source


def test_a_device_is_compiled_in_and_held_by_the_host_by_its_name():
    torch.manual_seed(0)
    compiled = dycl.compile(DeviceAndDtype().eval(), _inputs()[0])
    assert "['device', 'cpu']" in compiled.host_source
    assert "['dtype', 'float32']" in compiled.host_source
    # statics have no port: every compiled input is a tensor
    assert all(p["kind"] == "tensor" for e in compiled.manifest["sub_dnns"].values() for p in e["inputs"])


class Ragged(nn.Module):
    """A dict with a key on one path only, read after the join."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x):
        feats = {"base": self.fc(x)}
        if x.sum() > 0:
            feats["extra"] = feats["base"] * 2
        return torch.stack(list(feats.values())).sum(0)


class RaggedPairs(nn.Module):
    """A list of pairs, one pair longer on one path, read by a helper after the join."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def total(self, pairs):
        return torch.stack([a * b for a, b in pairs]).sum(0)

    def forward(self, x):
        h = self.fc(x)
        pairs = [(h, x)]
        if h.sum() > 0:
            pairs.append((x, x))
        return self.total(pairs)


@pytest.mark.parametrize("cls", [Ragged, RaggedPairs])
def test_a_structure_that_differs_between_paths_is_refused_at_the_users_line(cls):
    torch.manual_seed(0)
    model = cls().eval()
    with pytest.raises(dycl.UnsupportedError) as error:
        dycl.compile(model, _inputs()[0])
    assert "test_pytree_ports.py:" in str(error.value)
    assert error.value.location is not None and error.value.location.path.endswith("test_pytree_ports.py")


class ReturnsState(nn.Module):
    """Returns the dataclass itself: the host holds only a stand-in of it."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.Linear(6, 6)

    def forward(self, x):
        state = DecoderState(self.cell(x))
        if state.hidden.sum() > 0:
            state = DecoderState(state.hidden * 2, state.steps + 1)
        return state


def test_returning_an_object_the_host_holds_as_a_stand_in_is_refused_not_retyped():
    torch.manual_seed(0)
    with pytest.raises(dycl.UnsupportedError, match=r"stand-in \(DecoderState") as error:
        dycl.compile(ReturnsState().eval(), _inputs()[0])
    assert error.value.location is not None and error.value.location.path.endswith("test_pytree_ports.py")
    assert "return state" in str(error.value)


class ReturnsDevice(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x):
        device = x.device
        h = self.fc(x)
        if h.sum() > 0:
            h = h + torch.ones(6, device=device)
        return h, device


def test_returning_a_device_the_host_holds_by_name_is_refused():
    torch.manual_seed(0)
    with pytest.raises(dycl.UnsupportedError, match=r"stand-in \(HostDevice") as error:
        dycl.compile(ReturnsDevice().eval(), _inputs()[0])
    assert error.value.location is not None and error.value.location.path.endswith("test_pytree_ports.py")
