"""Issue 27: no crash that depends on what the process imported first, and a default
symbolic batch that only ties the inputs that carry the batch."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import torch
from torch import nn

import dycl
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch
from dycl.model.dynamic import dynamic_dims

# torchvision's ops/_register_onnx_ops.py imports these by their deprecated module paths
# (transformers imports torchvision where it is installed); importing the shim rebinds
# torch.onnx.symbolic_helper to a module without the helpers' private names
_SHIM_FIRST = """
import torch.onnx.symbolic_helper
from torch.onnx import symbolic_opset11
from torch.onnx.symbolic_helper import parse_args
import torch
assert not hasattr(torch.onnx.symbolic_helper, "_type_utils"), "the shim no longer replaces the module"
"""

_COMPILE_AND_COMPARE = """
import torch
from torch import nn
import dycl

class TinyCausalLM(nn.Module):
    def __init__(self, vocab=50, width=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.mix = nn.Linear(width, width)
        self.head = nn.Linear(width, vocab)

    def forward(self, input_ids):
        positions = torch.ones_like(input_ids).cumsum(-1)       # aten::cumsum of int64
        starts = (torch.diff(positions, dim=-1, prepend=positions[:, :1]) != 1).cumsum(-1)  # diff, bool cumsum
        hidden = self.embed(input_ids) + starts.unsqueeze(-1).float()
        hidden = torch.tanh(self.mix(hidden))
        if hidden[:, -1].mean() > 0:
            hidden = hidden * 2
        return self.head(hidden)

torch.manual_seed(0)
model = TinyCausalLM().eval()
compiled = dycl.compile(model, torch.randint(0, 50, (2, 7)), dynamic={"input_ids": {0: "batch", 1: "seq"}})
paths = set()
for seed in range(8):
    ids = torch.randint(0, 50, (1 + seed % 3, 3 + seed), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        expected = model(ids)
    assert torch.allclose(compiled(ids), expected, atol=1e-5), seed
    paths.add(bool(torch.tanh(model.mix(model.embed(ids)))[:, -1].mean() > 0))
print("PATHS", len(paths))
"""


def _run(source: str, folder: Path) -> subprocess.CompletedProcess:
    script = folder / "script.py"  # a file: dycl reads the model's source back
    script.write_text(textwrap.dedent(source))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)


def test_dycl_symbolics_work_after_the_deprecated_shim_was_imported_first(tmp_path):
    """In a fresh process (import order is real): the shim first, then dycl compiles a
    model whose export needs dycl's translations of diff and cumsum."""
    result = _run(_SHIM_FIRST + _COMPILE_AND_COMPARE, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "PATHS 2" in result.stdout


def test_dycl_symbolics_work_when_the_shim_is_imported_after_dycl(tmp_path):
    result = _run("import dycl\n" + _SHIM_FIRST + _COMPILE_AND_COMPARE, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "PATHS 2" in result.stdout


class ShiftThenGate(nn.Module):
    """``x`` (rows, features) plus a per-feature ``bias`` (features,): only ``x`` has a batch."""

    def forward(self, x, bias):
        shifted = x + bias
        if shifted.mean() > 0:
            return shifted.relu() * bias
        return shifted - bias.abs().sum()


def test_only_inputs_with_the_batch_size_share_the_default_batch_dim():
    example = (torch.randn(3, 2), torch.randn(2))
    assert dynamic_dims(True, ["x", "bias"], example) == {"x": {0: "batch"}}
    assert dynamic_dims(True, ["x", "mask"], (torch.randn(3, 2), torch.randn(3, 5))) == {
        "x": {0: "batch"}, "mask": {0: "batch"}}
    assert dynamic_dims("all", ["x", "bias"], example) == {"x": {0: "batch", 1: "x_d1"}, "bias": {0: "bias_d0"}}


def test_a_bias_beside_a_batched_input_compiles_with_the_default_batch(tmp_path):
    """ExportDB's nested_function shape pattern, (3, 2) and (2,): every call used to be
    refused ("input 'bias': dimension 0 is 'batch', expected 3")."""
    model = ShiftThenGate().eval()
    compiled = dycl.compile(model, (torch.randn(3, 2), torch.randn(2)))
    generator = torch.Generator().manual_seed(0)
    inputs = [(torch.randn(rows, 2, generator=generator) + shift, torch.randn(2, generator=generator))
              for rows in (3, 1, 5, 8) for shift in (-2.0, 2.0)]
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-6) == 2
    assert compiled.manifest["inputs"][1]["shape"] == [2]
    report = run_host_without_torch(compiled.save(tmp_path / "gate"), model, inputs, atol=1e-6)
    assert report == {"checked": len(inputs), "problems": [], "torch_loaded": False}
