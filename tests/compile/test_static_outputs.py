"""A sub-DNN whose outputs are all statics (``None`` masks, a dtype) is never run (note "static
outputs" in ``hostgen.host_loader``): ONNX Runtime refuses to load a graph with no outputs, which
made ``dycl.compile`` crash (found with Qwen2-MoE, whose two attention masks are ``None`` on the
example). A helper or library call on tensors that returns only statics is traced with the tensor
code (``hcfg.traced_statics``) instead of being refused as host work."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from dycl.hcfg.levers import Levers

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch

try:
    from transformers import Qwen2Config
    from transformers.masking_utils import create_causal_mask, create_sliding_window_causal_mask
except ImportError:  # the test that needs them is skipped
    Qwen2Config = create_causal_mask = create_sliding_window_causal_mask = None

ATOL = 1e-5


def attention_masks(hidden, attention_mask=None, sliding_window=None):
    """Masks only where asked for, as attention helpers are written."""
    causal = sliding = None
    if attention_mask is not None:
        causal = attention_mask[:, None, None, :].to(hidden.dtype)
    if sliding_window is not None:
        size = hidden.shape[1]
        sliding = torch.ones(size, size, dtype=torch.bool).triu(-sliding_window)
    return causal, sliding


class GatedEncoder(nn.Module):
    """A gated residual block; returns its hidden states with the masks a decoder would take,
    built by a helper (both None here: no padding mask, no sliding window)."""

    def __init__(self, width: int = 8):
        super().__init__()
        self.proj = nn.Linear(width, width)
        self.gate = nn.Linear(width, 1)
        self.block = nn.Sequential(nn.Linear(width, width), nn.GELU())

    def forward(self, x):
        h = self.proj(x)
        if self.gate(h).abs().mean() > 0.5:
            h = h + self.block(h)
        causal_mask, sliding_mask = attention_masks(h)
        return h, causal_mask, sliding_mask


class MaskedByTransformers(nn.Module):
    """Qwen2-MoE's form: transformers' mask functions, which give None where SDPA needs no mask,
    called after a data-dependent branch; attention on the mask, or causal where it is None."""

    def __init__(self, width: int = 8):
        super().__init__()
        self.config = Qwen2Config(hidden_size=width, num_attention_heads=2, num_key_value_heads=2,
                                  sliding_window=64, use_sliding_window=True)
        self.config._attn_implementation = "sdpa"
        self.proj, self.skip, self.out = nn.Linear(width, width), nn.Linear(width, width), nn.Linear(width, width)

    def forward(self, x):
        h = self.proj(x)
        if h.abs().mean() > 1.0:
            h = torch.tanh(self.skip(h))
        causal = create_causal_mask(self.config, h, None, None)
        sliding = create_sliding_window_causal_mask(self.config, h, None, None)
        return h, causal, sliding


class DtypeAfterBranch(nn.Module):
    """The model's own helper returns a mask that is None and the dtype to compute in."""

    def __init__(self, width: int = 8):
        super().__init__()
        self.a, self.b, self.head = nn.Linear(width, width), nn.Linear(width, width), nn.Linear(width, 3)

    def mask_and_dtype(self, hidden):
        return None, hidden.dtype

    def forward(self, x):
        h = self.a(x)
        if h.norm(dim=-1).mean() > 2.0:
            h = torch.relu(self.b(h))
        else:
            h = self.b(h) * 0.5
        mask, dtype = self.mask_and_dtype(h)
        if mask is not None:
            h = h.masked_fill(mask, 0.0)
        return self.head(h.to(dtype)), mask


def _inputs(count: int = 16) -> list[torch.Tensor]:
    """Inputs of batch 1 to 3 and scales from 0.1 to 4 (the gates follow the scale)."""
    generator = torch.Generator().manual_seed(5)
    return [torch.randn(1 + i % 3, 4, 8, generator=generator) * (0.1, 0.4, 1.0, 4.0)[i % 4] for i in range(count)]


def _static_only_entries(compiled) -> list[str]:
    return [name for name, entry in compiled.manifest.sub_dnns.items() if not entry.outputs]


@pytest.mark.parametrize("single_graph", ["off", "on"])
def test_a_sub_dnn_with_only_static_outputs_is_not_run_and_the_model_agrees(single_graph, tmp_path):
    """The helper's masks are alone in a sub-DNN after the join: its graph has no outputs (it
    crashed ONNX Runtime's session); the host gives the statics, in process and without torch.
    With the single-graph lowering asked for, the lowering declines (a static is no port of the
    one graph) and the host runs the model."""
    torch.manual_seed(0)
    model = GatedEncoder().eval()
    inputs = _inputs()
    compiled = dycl.compile(model, inputs[0], optimize=Levers(single_graph=single_graph))
    assert _static_only_entries(compiled), "the test must compile a sub-DNN that has only statics to give"
    assert compiled.stats["single_graph"]["chosen"] == "host"
    assert assert_equivalent(model, compiled, inputs, atol=ATOL) >= 2
    report = run_host_without_torch(compiled.save(tmp_path / "net"), model, inputs, ATOL)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


def test_transformers_masks_that_are_none_at_symbolic_sizes_agree(tmp_path):
    """The library form (Qwen2-MoE's): at symbolic batch and sequence, other sequence lengths
    agree with eager on both paths, in process and on the torch-free host."""
    pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = MaskedByTransformers().eval()
    generator = torch.Generator().manual_seed(3)
    inputs = [torch.randn(batch, seq, 8, generator=generator) * scale
              for batch, seq, scale in [(2, 4, 1.0), (1, 6, 0.1), (3, 2, 4.0), (2, 5, 0.3), (1, 3, 5.0), (2, 7, 0.2)]]
    compiled = dycl.compile(model, inputs[0], dynamic={"x": {0: "batch", 1: "seq"}})
    assert _static_only_entries(compiled)
    assert assert_equivalent(model, compiled, inputs, atol=ATOL) >= 2
    report = run_host_without_torch(compiled.save(tmp_path / "net"), model, inputs, ATOL)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


def test_a_helper_that_returns_a_none_mask_and_a_dtype_compiles(tmp_path):
    """``mask, dtype = self.mask_and_dtype(h)`` holds no tensor: it was refused as host work that
    needs the model; it is traced with the tensor code and agrees on both paths."""
    torch.manual_seed(0)
    model = DtypeAfterBranch().eval()
    inputs = _inputs()
    compiled = dycl.compile(model, inputs[0])
    assert assert_equivalent(model, compiled, inputs, atol=ATOL) >= 2
    report = run_host_without_torch(compiled.save(tmp_path / "net"), model, inputs, ATOL)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}


def size_label(hidden, threshold=2):
    """A plain helper of numbers: the host copies it and calls it on each call's array."""
    return "many" if len(hidden) > threshold else "few"


class LabelsItsBatch(nn.Module):
    def __init__(self, width: int = 8):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        h = self.fc(x)
        if h.abs().mean() > 0.5:
            h = h * 2
        return h, size_label(h)


def test_a_plain_helper_the_host_can_run_stays_on_the_host(tmp_path):
    """Its string is decided per call (batch 1 to 3), not frozen into a graph at the example's."""
    torch.manual_seed(0)
    model = LabelsItsBatch().eval()
    inputs = _inputs()
    compiled = dycl.compile(model, inputs[0])
    with torch.no_grad():
        assert {model(x)[1] for x in inputs} == {"many", "few"}
    assert assert_equivalent(model, compiled, inputs, atol=ATOL) >= 2
    report = run_host_without_torch(compiled.save(tmp_path / "net"), model, inputs, ATOL)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}
