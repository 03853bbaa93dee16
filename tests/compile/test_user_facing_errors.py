"""Mistakes with inputs get one line that says what was expected (issue 31, point 6)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn as nn

import dycl


class Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        y = self.bn(self.conv(x))
        if y.mean() > 0:
            return y
        return -y


def gate():
    class Gate(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            y = self.fc(x)
            if y.sum() > 0:
                return y
            return -y

    return Gate().eval()


def test_a_wrong_example_says_it_failed_while_running_the_model_on_it_with_the_users_line():
    with pytest.raises(ValueError) as info:
        dycl.compile(Conv().eval(), torch.randn(3, 8, 8))  # a 4-D input is needed
    message = str(info.value)
    assert message.startswith("while running your model on the example: ValueError: expected 4D input")
    assert "test_user_facing_errors.py:" in message and "self.bn(self.conv(x))" in message
    assert len(message.splitlines()) == 1


def test_a_tuple_for_a_tensor_is_named_in_torch_terms():
    compiled = dycl.compile(gate(), torch.randn(1, 4))
    x = torch.randn(1, 4)
    with pytest.raises(TypeError, match=r"^expected a torch.Tensor for x, got tuple$"):
        compiled((x,))
    assert compiled(x).shape == (1, 4)  # the same tensor, passed as the model takes it, works


def test_the_host_command_line_gives_one_line_and_a_nonzero_exit(tmp_path):
    artifact = dycl.compile(gate(), torch.randn(1, 4)).save(tmp_path / "gate")
    np.save(tmp_path / "x64.npy", np.ones((1, 4), np.float64))
    np.save(tmp_path / "x32.npy", np.ones((1, 4), np.float32))
    host = str(artifact / "host.py")
    done = subprocess.run([sys.executable, host, str(tmp_path / "x64.npy"), "--out", str(tmp_path / "y.npz")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == ["host.py: error: ValueError: input 'x': expected dtype float32, "
                                                "got float64"]
    debug = subprocess.run([sys.executable, host, str(tmp_path / "x64.npy"), "--out", str(tmp_path / "y.npz"),
                            "--debug"], capture_output=True, text=True, timeout=120)
    assert debug.returncode == 1 and "Traceback" in debug.stderr
    good = subprocess.run([sys.executable, host, str(tmp_path / "x32.npy"), "--out", str(tmp_path / "y.npz")],
                          capture_output=True, text=True, timeout=120)
    assert good.returncode == 0 and (tmp_path / "y.npz").is_file()
