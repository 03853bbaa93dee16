"""``dycl.harness.profile``: per-sub-DNN time through the host, host left as it was (issue 31, point 10)."""

from __future__ import annotations

import time

import torch

import dycl
from dycl.harness.profile import profile
from tests.dycl.test_summary import Gate


def test_profile_counts_every_sub_dnn_call_and_restores_the_host():
    compiled = dycl.compile(Gate().eval(), torch.randn(1, 4))
    host = compiled._host
    before = dict(host._call)
    slow = next(iter(before))
    original = host._call[slow]

    def slower(*args, **kwargs):
        time.sleep(0.01)
        return original(*args, **kwargs)

    host._call[slow] = slower
    found = profile(compiled, [(torch.randn(1, 4),) for _ in range(3)])
    assert found.inputs == 3 and found.sub_dnns[0].index == slow  # the slowest first
    assert found.sub_dnns[0].calls == 3 and found.sub_dnns[0].total_ms >= 30
    assert found.total_ms >= sum(s.total_ms for s in found.sub_dnns)
    assert host._call[slow] is slower and set(host._call) == set(before)  # put back
    assert "test_summary.py:" in found.sub_dnns[0].lines
