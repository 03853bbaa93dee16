"""Records across the model boundary (``dycl.model.records``), on objects people write
themselves: a plain Python class holding a running state and a dataclass output, taken as
arguments and returned, on models with a data-dependent branch. In process the compiled
model takes and returns objects of the user's classes (a state it is passed and returns is
the caller's, updated as eager updates it); the torch-free host takes and returns their
plain form, and says which part of a wrong structure it expected otherwise.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from dycl.hostgen.manifest import Manifest
from torch import nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch


class Memory:
    """What a streaming model carries from one chunk to the next."""

    def __init__(self, total: torch.Tensor, last: torch.Tensor, device: torch.device) -> None:
        self.total = total
        self.last = last
        self.device = device


@dataclasses.dataclass
class Step:
    scores: torch.Tensor
    memory: Memory


class Streaming(nn.Module):
    """Adds each chunk to a running total, or resets it on a chunk of negative mean: a new memory each call."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, chunk: torch.Tensor, memory: Memory) -> Step:
        h = self.proj(chunk)
        if h.mean() > 0:
            total = memory.total + h.sum(1)
        else:
            total = h.sum(1)
        return Step(total.softmax(-1), Memory(total, h[:, -1], memory.device))


class InPlace(nn.Module):
    """Updates the memory it is passed and returns it, as an LM returns its KV cache."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, chunk: torch.Tensor, memory: Memory):
        h = self.proj(chunk)
        if chunk.mean() > 0:
            memory.total = memory.total + h.sum(1)
        else:
            memory.total = memory.total - h.sum(1)
        memory.last = torch.cat([memory.last, h[:, -1:]], dim=1)
        return h.relu(), memory


class Forgets(nn.Module):
    """Updates the memory it is passed and does not return it."""

    def forward(self, chunk: torch.Tensor, memory: Memory) -> torch.Tensor:
        memory.total = memory.total + chunk.sum(1)
        return chunk * 2


def _memory(batch: int, length: int = 1, seed: int = 0) -> Memory:
    generator = torch.Generator().manual_seed(seed)
    return Memory(torch.randn(batch, 4, generator=generator), torch.randn(batch, length, 4, generator=generator),
                  torch.device("cpu"))


def _chunks(count: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(7)
    return [torch.randn(1 + n % 3, 2 + n % 2, 4, generator=generator) + (0.6 if n % 2 else -0.6) for n in range(count)]


def test_a_record_output_and_input_of_the_users_classes_agree_in_process_and_on_the_host(tmp_path):
    torch.manual_seed(0)
    model = Streaming().eval()
    compiled = dycl.compile(model, (_chunks(1)[0], _memory(1)),
                            dynamic={"chunk": {0: "batch", 1: "time"}, "memory": {0: "batch"}})
    inputs = [(chunk, _memory(chunk.shape[0], seed=n)) for n, chunk in enumerate(_chunks(8))]
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-6) == 2
    out = compiled(*inputs[0])
    assert type(out) is Step and type(out.memory) is Memory and out.memory.device == torch.device("cpu")
    directory = compiled.save(tmp_path / "streaming")
    report = run_host_without_torch(directory, model, inputs, atol=1e-6)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}
    manifest = Manifest.from_json(compiled.manifest.to_json())
    assert manifest == compiled.manifest and manifest.call.structures[0][:2] == ("memory", None)
    assert compiled.manifest["output"]["items"]["memory"]["returned_as"] == "record"


def test_the_host_names_what_a_wrong_structure_lacks(tmp_path):
    torch.manual_seed(0)
    model = Streaming().eval()
    compiled = dycl.compile(model, (_chunks(1)[0], _memory(1)), dynamic={"chunk": {0: "batch"}, "memory": {0: "batch"}})
    loaded = dycl.load(compiled.save(tmp_path / "streaming"))
    chunk = _chunks(1)[0].numpy()
    plain = {"record": "Memory", "fields": {"total": np.zeros((1, 4), np.float32),
                                            "last": np.zeros((1, 1, 4), np.float32), "device": "cpu"}}
    out = loaded.run_numpy(chunk, plain)
    assert out["record"] == "Step" and sorted(out["fields"]) == ["memory", "scores"]  # a dataclass is a record
    assert out["fields"]["memory"]["record"] == "Memory" and out["fields"]["memory"]["fields"]["device"] == "cpu"
    with pytest.raises(ValueError, match=r"argument \"memory\['last'\]\": expected an array, got a list"):
        loaded.run_numpy(chunk, {**plain, "fields": {**plain["fields"], "last": [0.0]}})
    with pytest.raises(ValueError, match=r"expected keys \['total', 'last', 'device'\], got keys \['total'\]"):
        loaded.run_numpy(chunk, {**plain, "fields": {"total": plain["fields"]["total"]}})
    with pytest.raises(ValueError, match=r"expected 'cpu' \(compiled in\), got a str 'cuda'"):
        loaded.run_numpy(chunk, {**plain, "fields": {**plain["fields"], "device": "cuda"}})
    with pytest.raises(ValueError, match=r"expected a Memory record"):
        loaded.run_numpy(chunk, plain["fields"])


def test_a_record_updated_in_place_and_returned_is_the_callers_updated_as_eager_does(tmp_path):
    torch.manual_seed(0)
    model = InPlace().eval()
    compiled = dycl.compile(model, (_chunks(1)[0], _memory(1)),
                            dynamic={"chunk": {0: "batch", 1: "time"}, "memory": {0: "batch"},
                                     "memory_last": {1: "length"}})  # all the memory's arrays; one by its name
    paths = assert_equivalent(model, compiled, [(chunk, _memory(chunk.shape[0], 1 + n % 3, seed=n))
                                                for n, chunk in enumerate(_chunks(8))], min_paths=2, atol=1e-6)
    assert paths == 2
    assert compiled.manifest.call.returned == (("memory", None, (1,)),)  # output[1] is the memory passed in
    assert Manifest.from_json(compiled.manifest.to_json()) == compiled.manifest
    inputs = [(chunk, _memory(chunk.shape[0], 2, seed=n)) for n, chunk in enumerate(_chunks(6))]
    report = run_host_without_torch(compiled.save(tmp_path / "in_place"), model, inputs, atol=1e-6)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}  # the plain form updated too
    for n, chunk in enumerate(_chunks(4)):
        mine, theirs = _memory(chunk.shape[0], 2, seed=n), _memory(chunk.shape[0], 2, seed=n)
        with torch.no_grad():
            _, returned = compiled(chunk, mine)
            model(chunk, theirs)
        assert returned is mine and mine.last.shape == theirs.last.shape == (chunk.shape[0], 3, 4)
        torch.testing.assert_close(mine.total, theirs.total, atol=1e-6, rtol=0)
        torch.testing.assert_close(mine.last, theirs.last, atol=1e-6, rtol=0)


def test_a_record_updated_in_place_and_not_returned_is_refused():
    with pytest.raises(dycl.UnsupportedError, match="updates the Memory it is passed in place and does not return"):
        dycl.compile(Forgets().eval(), (_chunks(1)[0], _memory(1)))
