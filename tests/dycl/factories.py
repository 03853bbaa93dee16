"""A ``pkg.mod:factory`` model for the CLI tests."""

from __future__ import annotations

import torch

from tests.dycl.test_harness_cli import Exit


def exit_model():
    torch.manual_seed(0)
    return Exit().eval(), torch.randn(1, 4)
