"""Progress bars: shown when asked or watched, silent otherwise."""

from __future__ import annotations

import torch

import dycl
from dycl.progress import Progress, interactive, waiting
from tests.dycl.test_coverage import TwoGates


def test_compile_is_silent_when_not_interactive_and_shows_bars_when_asked(capfd):
    torch.manual_seed(0)
    model = TwoGates().eval()
    assert not interactive()  # pytest captures stderr: nobody is watching
    dycl.compile(model, torch.randn(1, 4))
    assert capfd.readouterr().err == ""
    dycl.compile(model, torch.randn(1, 4), progress=True)
    err = capfd.readouterr().err
    assert "[dycl] rewrite and HCFG" in err and "3/3" in err
    assert "[dycl] export and compile 6 sub-DNNs (onnxruntime)" in err and "6/6" in err


def test_waiting_ticks_only_under_a_shown_bar(capfd):
    with waiting("tuning"):
        pass
    assert capfd.readouterr().err == ""
    bar = Progress("compile", 1, enabled=True)
    with bar.active(), waiting("tuning 3 sub-DNNs"):
        pass
    bar.step("done")
    err = capfd.readouterr().err
    assert "[dycl] tuning 3 sub-DNNs" in err and "[dycl] compile" in err
