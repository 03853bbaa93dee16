"""Functions of an installed package that decide on tensor values are rewritten like user code
(``dycl.model.library_decisions``): plain functions as well as modules, called from ``forward``
or from a helper, and whether or not the example reaches the deciding line eagerly (the lines
only another input reaches are followed from the refusal's own stack). Each model agrees with
eager on inputs that take several paths through the library, in process and in the torch-free
host; a library decision the rewriter cannot compile is refused at the library's line.

The package is written to a temporary site directory that dycl treats as installed packages;
the models to a user's module beside it, importing the package as users do.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from dycl.rewriter import user_code
from torch import nn

import dycl
from dycl.harness.paths import model_source_files, record_path
from dycl.harness.testing import outputs_match
from dycl.harness.testing_host import run_host_without_torch

ATOL = 1e-5

LIBRARY = '''
"""Tensor utilities, written as such packages write them."""
import torch


def soft_clip(x, limit=1.0):
    peak = x.abs().amax()
    if peak > limit:  # DECISION clip
        x = x * (limit / peak)
    return x


def gated_residual(x, gate):
    weight = torch.sigmoid(gate(x))
    if weight.mean().item() > 0.5:  # DECISION gate
        return x + weight * x
    return x - 0.5 * weight


def renormalise(x, cap=5.0):
    norm = float(x.norm())  # DECISION norm
    if norm > cap:
        return x * (cap / x.norm())
    return x


def settle(x):
    while x.abs().max() > 1:  # DECISION loop
        x = x / 2
    return x
'''


USER = '''
import torch
from torch import nn

import mylib
from mylib import gated_residual


class Block(nn.Module):
    """A residual block that leans on the library from forward and from a helper."""

    def __init__(self, width=6):
        super().__init__()
        self.proj = nn.Linear(width, width)
        self.gate = nn.Linear(width, width)

    def _stabilise(self, h):
        return mylib.soft_clip(h, limit=2.0)

    def forward(self, x):
        h = self._stabilise(self.proj(x))
        return gated_residual(h, self.gate)


class OnlyLargeInputs(nn.Module):
    """The library runs in a branch the example does not take."""

    def __init__(self, width=6):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        h = self.fc(x)
        if h.abs().sum() > 12:
            h = self.tidy(h)
        return torch.tanh(h) + 0.1

    def tidy(self, h):
        return mylib.renormalise(h) * 3


class Settled(nn.Module):
    def __init__(self, width=6):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return mylib.settle(self.fc(x))
'''


@pytest.fixture
def modules(tmp_path, monkeypatch):
    """``(mylib, models)``: the package, imported from a site directory dycl treats as
    installed packages, and the user's module of models that imports it."""
    site, user = tmp_path / "site-packages", tmp_path / "user"
    (site / "mylib").mkdir(parents=True)
    user.mkdir()
    (site / "mylib" / "__init__.py").write_text(textwrap.dedent(LIBRARY))
    (user / "lib_users.py").write_text(textwrap.dedent(USER))
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(user))
    monkeypatch.setattr(user_code, "_LIBRARY_PATHS", (*user_code._LIBRARY_PATHS, str(site)))
    user_code.is_user_code.cache_clear()
    library, models = importlib.import_module("mylib"), importlib.import_module("lib_users")
    assert not user_code.is_user_code(library.soft_clip) and user_code.is_user_code(models.Block)
    yield library, models
    for name in ("mylib", "lib_users"):
        sys.modules.pop(name, None)
    user_code.is_user_code.cache_clear()


def _line_of(function, marker: str) -> int:
    lines, first = inspect.getsourcelines(function)
    return first + next(i for i, line in enumerate(lines) if marker in line)


def _inputs(n: int = 24, seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(2, 6, generator=generator) * (0.2 + i % 4) for i in range(n)]


def _agrees(model: nn.Module, example: torch.Tensor, inputs: list[torch.Tensor], library, tmp_path: Path) -> int:
    """Compile on ``example``; assert agreement with eager on ``inputs`` in process and in the
    host; return the number of distinct eager paths through the model's and the library's code."""
    compiled = dycl.compile(model, example)
    files = model_source_files(model) | {library.__file__}
    paths = set()
    with torch.no_grad():
        for i, x in enumerate(inputs):
            expected, path = record_path(model, x, files=files)
            paths.add(path)
            problem = outputs_match(expected, compiled(x), ATOL)
            assert problem is None, f"input #{i}: {problem}"
    host = run_host_without_torch(compiled.save(tmp_path / "artifact"), model, inputs, ATOL)
    assert host["checked"] == len(inputs) and not host["problems"], host
    return len(paths)


def test_a_plain_library_function_deciding_on_data_is_followed(modules, tmp_path):
    library, models = modules
    torch.manual_seed(0)
    model = models.Block().eval()
    inputs = _inputs()
    assert _agrees(model, inputs[0], inputs, library, tmp_path) >= 3


def test_a_library_decision_the_example_does_not_reach_is_followed(modules, tmp_path):
    library, models = modules
    torch.manual_seed(0)
    model = models.OnlyLargeInputs().eval()
    inputs = _inputs()
    example = torch.zeros(2, 6)
    with torch.no_grad():  # the example skips the library; other inputs run it
        assert model.fc(example).abs().sum() <= 12
        assert any(model.fc(x).abs().sum() > 12 for x in inputs)
    assert _agrees(model, example, inputs, library, tmp_path) >= 3


def test_a_followed_decision_dycl_cannot_compile_names_the_library_line(modules):
    library, models = modules
    torch.manual_seed(0)
    model = models.Settled().eval()
    with pytest.raises(dycl.UnsupportedError) as info:
        dycl.compile(model, _inputs()[3])
    assert info.value.location.path == library.__file__
    assert info.value.location.line == _line_of(library.settle, "# DECISION loop")
