"""Shared check for the fresh soundness hunt (tests/soundness/test_fresh_hunt_*.py): a
model written the way other people write PyTorch, compiled on its first input, must equal
eager on every input, in process and through the saved torch-free host, over a stated
number of distinct eager paths."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import torch

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch


class Case(NamedTuple):
    """One hunted model: ``build()`` makes it, ``inputs()`` lists what it is called on (the
    first is the compile example), ``paths`` is how many distinct eager paths they take (one only
    where the values, not the path, are under test: host arithmetic).
    ``refused``: where dycl refuses the model instead, a pattern its error must match (the
    user's file:line for an ``UnsupportedError``; the static dimension for a call's
    ``ValueError``; the user's line for a call's ``RuntimeError``) -- never a wrong answer."""

    build: Callable[[], torch.nn.Module]
    inputs: Callable[[], list[Any]]
    paths: int
    atol: float = 1e-5
    refused: str | None = None
    dynamic: Any = True  # dycl.compile's ``dynamic=``


def check_case(case: Case, tmp_path: Path) -> int:
    """Compile ``case`` on its first input; assert it equals eager on all inputs in
    process and through the torch-free host; return the number of eager paths (or, for
    a refused case, assert the refusal and return ``case.paths``)."""
    if case.refused is not None:
        with pytest.raises((dycl.UnsupportedError, ValueError, RuntimeError), match=case.refused):
            _check_equivalent(case, tmp_path)
        return case.paths
    return _check_equivalent(case, tmp_path)


def _check_equivalent(case: Case, tmp_path: Path) -> int:
    torch.manual_seed(0)
    model = case.build().eval()
    inputs = case.inputs()
    assert len(inputs) >= 50
    compiled = dycl.compile(model, inputs[0], dynamic=case.dynamic)
    paths = assert_equivalent(model, compiled, inputs, min_paths=min(case.paths, 2), atol=case.atol)
    report = run_host_without_torch(compiled.save(tmp_path / "art"), model, inputs, atol=case.atol)
    assert report["checked"] == len(inputs) and not report["problems"], report["problems"][:3]
    return paths


def at(construct: str, code: str) -> str:
    """A pattern for an error about ``construct`` (a regex) that shows the user's line holding ``code``."""
    return rf"{construct}.* at .*\.py:\d+\n.*{re.escape(code)}"


def seeded(seed: int) -> torch.Generator:
    """A generator for reproducible inputs."""
    return torch.Generator().manual_seed(seed)
