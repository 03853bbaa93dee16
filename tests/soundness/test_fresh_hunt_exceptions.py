"""Fresh hunt, family 1: exceptions and context managers inside ``forward`` (``try/except``
around tensor code, ``assert`` and ``raise`` on tensor values, ``torch.no_grad`` /
``inference_mode`` / ``autocast`` blocks, ``contextlib`` helpers)."""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.soundness.fresh_hunt import Case, at, check_case, seeded


class FirstPositiveOrZero(nn.Module):  # "find the first hit, else a default" with IndexError
    def forward(self, x):
        try:
            idx = (x > 1.0).nonzero()[0, 0]
            return x[idx:] * 2
        except IndexError:
            return x.new_zeros(1)


def _first_inputs():
    g = seeded(101)
    return [torch.randn(6, generator=g) * (0.3 + i % 4) for i in range(50)]


class RaiseOnNegative(nn.Module):  # input validation on values, then a branch
    def forward(self, x):
        if (x < -10).any():
            raise ValueError("inputs must be >= -10")
        if x.mean() > 0:
            return x.sqrt()
        return x.abs()


def _nonneg_inputs():
    g = seeded(102)
    return [torch.rand(4, generator=g) * 4 - (i % 2) * 3 for i in range(50)]


class AssertFinite(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        assert torch.isfinite(x).all(), "non-finite input"
        h = self.fc(x)
        if h.max() > 0.5:
            h = F.relu(h)
        return h


def _finite_inputs():
    g = seeded(103)
    return [torch.randn(2, 4, generator=g) * (1 + i % 3) for i in range(50)]


class TryFinallyScale(nn.Module):  # try/finally with no exception raised
    def forward(self, x):
        scale = 1.0
        try:
            if x.sum() > 0:
                y = x * 2
            else:
                y = x - 1
        finally:
            scale = 0.5
        return y * scale


class NoGradTeacher(nn.Module):  # distillation-style: the teacher under no_grad
    def __init__(self):
        super().__init__()
        self.teacher = nn.Linear(4, 3)
        self.student = nn.Linear(4, 3)

    def forward(self, x):
        with torch.no_grad():
            t = self.teacher(x).softmax(-1)
        s = self.student(x)
        if t.max() > 0.5:
            return s + t
        return s


def _teacher_inputs():
    g = seeded(104)
    return [torch.randn(1, 4, generator=g) * (0.5 + i % 5) for i in range(50)]


class InferenceModeGate(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(4, 1)
        self.body = nn.Linear(4, 4)

    def forward(self, x):
        with torch.inference_mode():
            g = torch.sigmoid(self.gate(x)).mean()
        if g > 0.5:
            return self.body(x)
        return x


class AutocastBF16(nn.Module):  # mixed precision: linear runs in bfloat16 inside the block
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = self.fc(x)
        if h.float().mean() > 0:
            return h.float() * 2
        return h.float()


def _bf16_inputs():
    g = seeded(105)
    return [torch.randn(2, 8, generator=g) * (1 + i % 3) for i in range(50)]


@contextlib.contextmanager
def _noop_scope(name):
    yield name


class ContextlibHelper(nn.Module):  # a profiler-like named scope from contextlib
    def forward(self, x):
        with _noop_scope("block"):
            y = x * 3
        if y.sum() > 0:
            return y
        return -y


class SuppressIndexError(nn.Module):
    def forward(self, x):
        out = x.clone()
        with contextlib.suppress(IndexError):
            k = (x > 0).nonzero()[2, 0]
            out = out + k
        return out


def _suppress_inputs():
    g = seeded(106)
    return [torch.randn(5, generator=g) for _ in range(50)]


class SafeIntDivision(nn.Module):  # integer division guarded by try/except (torch raises on / 0)
    def forward(self, a, b):
        try:
            q = a // b
        except RuntimeError:
            q = torch.zeros_like(a)
        if q.sum() > 0:
            return q + 1
        return q


def _division_inputs():
    g = seeded(110)
    return [(torch.randint(-9, 10, (3,), generator=g), torch.randint(0 if i % 4 == 0 else 1, 4, (3,), generator=g))
            for i in range(50)]


class SafeGather(nn.Module):  # out-of-range indices fall back to zeros
    def forward(self, x, idx):
        try:
            out = x.gather(0, idx)
        except RuntimeError:
            out = x.new_zeros(idx.shape)
        if out.sum() > 0:
            return out * 2
        return out


def _gather_inputs():
    g = seeded(111)
    return [(torch.randn(4, generator=g), torch.randint(0, 4 + (i % 3 == 1), (3,), generator=g)) for i in range(50)]


def _randn(seed, shape=(3,)):
    def make():
        g = seeded(seed)
        return [torch.randn(*shape, generator=g) * (0.5 + i % 4) for i in range(50)]
    return make


CASES = {
    "first_positive_or_zero": Case(FirstPositiveOrZero, _first_inputs, 2,
                                   refused=at("fails on the example input", "idx = (x > 1.0).nonzero()[0, 0]")),
    "raise_on_negative": Case(RaiseOnNegative, _nonneg_inputs, 2),
    "assert_finite": Case(AssertFinite, _finite_inputs, 2),
    "try_finally_scale": Case(TryFinallyScale, _randn(107), 2),
    "no_grad_teacher": Case(NoGradTeacher, _teacher_inputs, 2),
    "inference_mode_gate": Case(InferenceModeGate, _randn(108, (1, 4)), 2),
    "autocast_bf16": Case(AutocastBF16, _bf16_inputs, 2, atol=1e-2,
                          refused=at("with statement", 'with torch.autocast("cpu", dtype=torch.bfloat16):')),
    "contextlib_helper": Case(ContextlibHelper, _randn(109), 2,
                              refused=at("with statement", 'with _noop_scope("block"):')),
    # the handler's recovery is not compiled (rewriter/try_blocks.py): the compiled model raises
    # at the user's line where eager recovers, never answers differently
    "safe_int_division": Case(SafeIntDivision, _division_inputs, 2,
                              refused=r"compiled code of test_fresh_hunt_exceptions.py:\d+.*Integer division by zero"),
    "safe_gather": Case(SafeGather, _gather_inputs, 2,
                        refused=r"compiled code of test_fresh_hunt_exceptions.py:\d+.*GatherElements"),
    "suppress_index_error": Case(SuppressIndexError, _suppress_inputs, 2,
                                 refused=at("with statement", "with contextlib.suppress(IndexError):")),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_exceptions_and_contexts(name, tmp_path):
    case = CASES[name]
    assert check_case(case, tmp_path) == case.paths
