"""Tests a compiled model decides once: a tensor's dtype (``hcfg.type_tests``) and how PyTorch runs
forward() (``rewriter.mode_predicates``: not scripted, traced or compiled, without grad). Each model
compiles (it was refused) and agrees with eager, in process and through the torch-free host, on
inputs that take several paths; golden snippets show the folded predicates gone."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from dycl.harness.host_agreement import assert_agrees_in_process_and_as_host
from tests.rewriter.golden import after, golden


class PrecisionSafeNorm(nn.Module):
    """Upcasts half inputs for the norm, as mixed-precision code does; skips work under scripting."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        dtype = x.dtype
        if x.dtype in (torch.float16, torch.bfloat16):
            x = x.float()
        if not x.is_floating_point():
            x = x.to(torch.float32)
        h = self.proj(self.norm(x))
        if torch.jit.is_scripting() or torch.jit.is_tracing():
            return h.to(dtype)
        if h.dtype == torch.float32 and h.abs().max() > 1.2:
            h = h.clamp(-1.2, 1.2)
        if torch.is_grad_enabled():
            h = h + 0.0 * x.sum()  # a training-only regulariser: never in the compiled model
        return h.to(dtype)


class CheckpointedBlock(nn.Module):
    """Recomputes under grad (training), runs plainly otherwise; dynamo-aware fast path."""

    def __init__(self):
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(6, 6), nn.GELU(), nn.Linear(6, 6))

    def forward(self, x):
        if torch.is_grad_enabled() and not torch.compiler.is_compiling():
            x = torch.utils.checkpoint.checkpoint(self.inner, x, use_reentrant=False)
        else:
            x = self.inner(x)
        if torch._dynamo.is_compiling():
            return x
        if torch.is_floating_point(x) and x.dtype.is_floating_point and x.mean() > 0:
            return F.relu(x)
        return x * -1


def _inputs(width: int, seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(2, width, generator=generator) * scale + shift
            for scale in (0.5, 3.0) for shift in (-1.0, 1.0) for _ in range(4)]


def test_dtype_tests_and_mode_predicates_compile(tmp_path):
    assert assert_agrees_in_process_and_as_host(PrecisionSafeNorm(), _inputs(8, 0), tmp_path, 1e-5) == 2


def test_grad_and_compiler_predicates_take_the_inference_path(tmp_path):
    assert assert_agrees_in_process_and_as_host(CheckpointedBlock(), _inputs(6, 1), tmp_path, 1e-5) == 2


def test_mode_predicates_fold_in_constant_propagation():
    # the dtype tests stay for the HCFG build, which decides them per explored state (hcfg.type_tests)
    assert after(CheckpointedBlock().eval(), "constprop") == golden("""
        x = self.inner(x)
        if torch.is_floating_point(x):
            if x.dtype.is_floating_point:
                if x.mean() > 0:
                    truth = True
                else:
                    truth = False
            else:
                truth = False
        else:
            truth = False
        if truth:
            return F.relu(x)
        return x * -1
    """)
