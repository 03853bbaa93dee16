"""A ``print`` in ``forward``: silent while compiling, once per call (issue 31, point 8)."""

from __future__ import annotations

import sys
import threading

import torch
import torch.nn as nn

import dycl
from dycl.model.quiet import muted


class Chatty(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        print("forward sees", tuple(x.shape))
        y = self.fc(x)
        if y.sum() > 0:
            return y
        return -y


def test_compiling_prints_nothing_and_each_call_prints_once(capsys):
    model = Chatty().eval()
    compiled = dycl.compile(model, torch.randn(1, 4))
    assert capsys.readouterr().out == ""
    compiled(torch.randn(2, 4))
    assert capsys.readouterr().out == "forward sees (2, 4)\n"
    model(torch.randn(2, 4))
    assert capsys.readouterr().out == "forward sees (2, 4)\n"


def test_muted_silences_only_the_muting_thread_and_restores_stdout(capsys):
    before = sys.stdout
    heard: list[str] = []
    started, release = threading.Event(), threading.Event()

    def other() -> None:
        started.wait()
        print("other thread")
        heard.append("printed")
        release.set()

    thread = threading.Thread(target=other)
    thread.start()
    with muted():
        print("muted thread")
        started.set()
        release.wait(10)
    thread.join()
    assert sys.stdout is before and heard == ["printed"]
    assert capsys.readouterr().out == "other thread\n"
