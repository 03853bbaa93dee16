"""Issue 26 item 7: module globals (and closure cells) that compile read are
guarded in the in-process model; the saved host keeps the compile-time values."""

from __future__ import annotations

import sys
import timeit

import pytest
import torch
import torch.nn as nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch
from dycl.in_process.globals_guard import StaleGlobalsError

THRESHOLD = 0.0
SCALE = 2.0
ACTIVATION = "relu"


def _shift(h):
    return h * SCALE + 1  # a branch-free helper: traced, reads SCALE at compile time


class GatedNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.out = nn.Linear(4, 2)

    def forward(self, x):
        h = self.fc(x)
        if h.mean() > THRESHOLD:
            h = _shift(getattr(torch, ACTIVATION)(h))
        else:
            h = -h
        return self.out(h)


def _inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    return [torch.randn(2, 4, generator=generator) * s + b for s in (0.5, 2) for b in (-1.0, 1.0) for _ in range(3)]


def _compiled():
    torch.manual_seed(0)
    model = GatedNet().eval()
    return model, dycl.compile(model, torch.randn(2, 4))


def test_unchanged_globals_compile_correctly_in_process_and_host(tmp_path):
    model, compiled = _compiled()
    assert len(compiled._globals_guard) >= 3  # THRESHOLD, ACTIVATION, SCALE at least
    assert assert_equivalent(model, compiled, _inputs(), atol=1e-5) >= 2
    report = run_host_without_torch(compiled.save(tmp_path / "art"), model, _inputs(), atol=1e-5)
    assert report["checked"] == len(_inputs()) and not report["problems"], report


@pytest.mark.parametrize("name, value", [("THRESHOLD", 0.5), ("SCALE", 3.0), ("ACTIVATION", "tanh")])
def test_a_rebound_global_raises_naming_it(monkeypatch, name, value):
    model, compiled = _compiled()
    x = torch.randn(2, 4)
    compiled(x)
    monkeypatch.setattr(sys.modules[__name__], name, value)
    with pytest.raises(StaleGlobalsError, match=rf"'{name}' in .*test_globals_guard\.py"):
        compiled(x)
    with pytest.raises(StaleGlobalsError):
        compiled.run_numpy(x.numpy())
    monkeypatch.undo()
    compiled(x)  # the original value back: valid again


def test_an_equal_immutable_value_is_not_a_change(monkeypatch):
    model, compiled = _compiled()
    monkeypatch.setattr(sys.modules[__name__], "ACTIVATION", "".join(["re", "lu"]))  # a new, equal str
    assert assert_equivalent(model, compiled, _inputs(), atol=1e-5) >= 2


def test_the_check_is_cheap():
    _, compiled = _compiled()
    guard = compiled._globals_guard
    per_check = min(timeit.repeat(guard.check, number=2000, repeat=5)) / 2000
    assert per_check < 20e-6, per_check  # a few globals: about a microsecond (see the report)


def _make_offset_hook(offset: float):
    def add_offset(module, args, output):
        return output + offset * SCALE  # a closure cell and a global, read when the hook is traced

    return add_offset


def test_a_hook_reading_a_global_and_a_closure_cell_is_guarded(monkeypatch):
    model, _ = _compiled()
    hook = _make_offset_hook(0.05)
    model.fc.register_forward_hook(hook)
    compiled = dycl.compile(model, torch.randn(2, 4))
    assert assert_equivalent(model, compiled, _inputs(), atol=1e-5) >= 2
    cell = dict(zip(hook.__code__.co_freevars, hook.__closure__))["offset"]
    cell.cell_contents = 1.5
    with pytest.raises(StaleGlobalsError, match="'offset' in the closure of _make_offset_hook.<locals>.add_offset"):
        compiled(torch.randn(2, 4))
    cell.cell_contents = 0.05
    compiled(torch.randn(2, 4))
    monkeypatch.setattr(sys.modules[__name__], "SCALE", 4.0)
    with pytest.raises(StaleGlobalsError, match="'SCALE'"):
        compiled(torch.randn(2, 4))

