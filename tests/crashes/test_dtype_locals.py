"""A dtype held by a local (``dtype = x.dtype; if dtype == torch.float16:``) is a type test the
explored states decide (``hcfg.type_tests``): compiled, in process and through the torch-free host,
on inputs taking several data paths. A tensor whose dtype differs between the paths that reach a
compiled part is refused at the user's line (``hcfg.variants``), never run on the other dtype."""

from __future__ import annotations

import libcst as cst
import pytest
import torch
import torch.nn as nn
from dycl.hcfg.static_host_values import folded_host_value

import dycl
from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host


class PrecisionAwareScores(nn.Module):
    """Attention-style scores with the usual half-precision guard, and a data-dependent temperature."""

    def __init__(self):
        super().__init__()
        self.query = nn.Linear(8, 8)
        self.key = nn.Linear(8, 8)

    def forward(self, x):
        dtype = x.dtype
        scores = self.query(x) @ self.key(x).transpose(0, 1)
        if dtype == torch.float16:
            scores = scores.clamp(min=-65504.0, max=65504.0)
        min_value = torch.finfo(dtype).min if dtype in (torch.float16, torch.bfloat16) else -1e9
        if scores.max() > 2.0:
            scores = scores / 2.0
        return scores.masked_fill(scores < -4.0, min_value).softmax(-1)


class FeatureDtype(nn.Module):
    """Reads the dtype of an intermediate tensor into a local and branches on it."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x):
        h = self.fc(x)
        kind = h.dtype
        if kind.is_floating_point and kind != torch.float64:
            h = torch.tanh(h)
        eps = 1e-3 if kind == torch.float16 else 1e-6
        if h.mean() > 0:
            return h / (h.norm() + eps)
        return h - eps


class MaybeDouble(nn.Module):
    """Moves large activations to float64, then branches on the dtype it got."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        if h.abs().max() > 2:
            h = h.double()
        if h.dtype == torch.float64:
            h = h * 0.5
        return h.float()


def _inputs(width: int, seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, width, generator=generator) * scale
            for batch in (3, 1, 4) for scale in (0.1, 1.0, 4.0) for _ in range(4)]


def test_a_dtype_local_of_the_input(tmp_path):
    assert assert_agrees_in_process_and_as_host(PrecisionAwareScores(), _inputs(8, 1), tmp_path, 1e-5,
                                                min_paths=2) >= 2


def test_a_dtype_local_of_an_intermediate(tmp_path):
    assert assert_agrees_in_process_and_as_host(FeatureDtype(), _inputs(6, 2), tmp_path, 1e-5, min_paths=2) >= 2


def test_a_dtype_that_differs_between_paths_is_refused_at_its_line():
    model = MaybeDouble().eval()
    dtypes = {model.fc(x).abs().max().item() > 2 for x in _inputs(4, 3)}
    assert dtypes == {False, True}  # both dtypes are reached by the inputs
    with pytest.raises(dycl.UnsupportedError, match=r"`h` with a different dtype on two paths .*float64.*float32"
                                                     r".*test_dtype_locals\.py:\d+"):
        dycl.compile(model, _inputs(4, 3)[0])


def _line(code: str):
    return cst.parse_module(code + "\n").body[0]


@pytest.mark.parametrize(("code", "dtypes", "after"), [
    ("low = torch.finfo(d).min", [torch.float16, torch.float16], "low = -65504.0"),
    ("eps = 1e-3 if d == torch.float16 else 1e-6", [torch.float32], "eps = 1e-06"),
    ("low = torch.finfo(d).min", [torch.float16, torch.float32], "low = torch.finfo(d).min"),  # differs by path
    ("t0 = time.time()", [torch.float32], "t0 = time.time()"),  # reads no dtype: stays host code
    ("n = k + 1", [torch.float32], "n = k + 1"),  # reads a number, which may come from data
])
def test_folded_host_value_golden(code: str, dtypes: list, after: str):
    import time
    states = [{"torch": torch, "time": time, "d": dtype, "k": 2} for dtype in dtypes]
    for state in states:
        exec(code, state)  # noqa: S102 - the statement has run on every state
    folded = folded_host_value(_line(code), states, frozenset({"d", "k", "low", "eps", "t0", "n"}))
    assert cst.Module([folded]).code.strip() == after
