"""Every test here builds its model from a fixed seed: the paths its inputs take depend on the weights."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _seeded_weights() -> None:
    torch.manual_seed(0)
