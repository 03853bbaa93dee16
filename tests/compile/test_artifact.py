"""The compiled artifact: ahead-of-time compilation of every branch, a readable
host without tensor math, integrity checks and input validation."""

from __future__ import annotations

import ast
import json
import textwrap

import dycl.hcfg.build
import numpy as np
import pytest
import torch
import torch.nn as nn

import dycl
import dycl.compiler
from dycl import rewriter
from dycl.backends.onnxruntime import OnnxRuntimeBackend
from dycl.harness.paths import model_source_files, record_path
from dycl.harness.testing import assert_equivalent
from tests.artifact.models import gate
from tests.nets import Decoder


def signed_inputs(sign: float, count: int = 15) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    return [sign * (torch.rand(1, 4, generator=generator) + 0.1) for _ in range(count)]


def test_untaken_branch_is_compiled_ahead_of_time(monkeypatch, tmp_path):
    model = gate()
    example = torch.ones(1, 4)  # path A only
    compiled = dycl.compile(model, example)
    compiled.save(tmp_path / "artifact")

    def no_more_compilation(*args, **kwargs):
        raise AssertionError("compilation after dycl.compile returned")

    monkeypatch.setattr(torch.onnx, "export", no_more_compilation)
    monkeypatch.setattr(OnnxRuntimeBackend, "compile", no_more_compilation)
    monkeypatch.setattr(rewriter, "rewrite", no_more_compilation)
    monkeypatch.setattr(dycl.hcfg.build.HCFGBuilder, "build", no_more_compilation)
    monkeypatch.setattr(dycl.compiler, "explore_paths", no_more_compilation)
    with pytest.raises(AssertionError, match="compilation after"):  # the patches catch a compile
        dycl.compile(model, example)

    files = model_source_files(model)
    _, example_path = record_path(model, example, files=files)
    path_b = signed_inputs(-1.0)
    assert all(record_path(model, x, files=files)[1] != example_path for x in path_b)
    inputs = path_b + signed_inputs(+1.0)
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5) == 2
    loaded = dycl.load(tmp_path / "artifact")
    assert assert_equivalent(model, loaded, inputs, min_paths=2, atol=1e-5) == 2


def test_host_is_readable_and_has_no_tensor_math():
    compiled = dycl.compile(gate(), torch.ones(1, 4))
    source = compiled.host_source
    forward = source[source.index("    def _forward"):source.index("\n\n\nif __name__")]
    assert compiled.manifest["sub_dnns"].keys() == {"subdnn_0", "subdnn_1", "subdnn_2", "subdnn_3"}
    assert _strip_locations(forward) == textwrap.dedent("""\
            def _forward(self, x):
                t, = self._call[0](x)
                if t:
                    x, = self._call[1](x)
                    steps = 1
                else:
                    x, = self._call[2](x)
                    steps = 0
                t_1, = self._call[3](x)
                return t_1, steps""").replace("\n", "\n    ").join(["    ", ""])
    assert "# models.py:" in forward  # the model's own file and line
    tree = ast.parse(source)
    assert not any(isinstance(n, (ast.Import, ast.ImportFrom)) and any(
        a.name.split(".")[0] in ("torch", "dycl") for a in n.names) for n in ast.walk(tree))
    forward_tree = ast.parse(textwrap.dedent(forward))
    calls = [ast.unparse(n.func) for n in ast.walk(forward_tree) if isinstance(n, ast.Call)]
    assert all(c.startswith(("self._call[", "self._variant")) or c.endswith((".item", ".append")) or c == "len"
               for c in calls), calls
    arithmetic = [n for n in ast.walk(forward_tree) if isinstance(n, ast.BinOp)]
    assert not arithmetic, "the host does no tensor math"


def _strip_locations(text: str) -> str:
    return "\n".join(line.split("  # ")[0].rstrip() for line in text.splitlines())


def test_flipped_byte_fails_the_checksum(tmp_path):
    artifact = dycl.compile(gate(), torch.ones(1, 4)).save(tmp_path / "net")
    victim = artifact / "subdnn_1.onnx"
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x01
    victim.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="checksum mismatch for subdnn_1.onnx"):
        dycl.load(artifact)


def test_missing_file_version_mismatch_and_missing_manifest(tmp_path):
    artifact = dycl.compile(gate(), torch.ones(1, 4)).save(tmp_path / "net")
    (artifact / "subdnn_2.onnx").unlink()
    with pytest.raises(FileNotFoundError, match="subdnn_2.onnx"):
        dycl.load(artifact)
    artifact = dycl.compile(gate(), torch.ones(1, 4)).save(tmp_path / "other")
    manifest = json.loads((artifact / "manifest.json").read_text())
    manifest["dycl_version"] = "0.0.1"
    (artifact / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="written by dycl 0.0.1"):
        dycl.load(artifact)
    (artifact / "manifest.json").unlink()
    with pytest.raises(FileNotFoundError, match="no manifest.json"):
        dycl.load(artifact)


@pytest.mark.parametrize(("arguments", "message"), [
    ((np.ones((4,), np.float32),), "expected rank 2 (shape [1, 4]), got rank 1 (shape [4])"),
    ((np.ones((1, 5), np.float32),), "expected shape [1, 4], got [1, 5]"),
    ((np.ones((1, 4), np.float64),), "expected dtype float32, got float64"),
    ((np.ones((1, 4), np.float32), np.ones((1, 4), np.float32)), "too many positional arguments; the model takes"),
    ((), "missing a required argument: 'x'; the model takes forward(x)"),
    (([[1.0, 2.0, 3.0, 4.0]],), "expected a numpy array, got list"),
])
def test_host_rejects_bad_inputs_naming_expected_and_got(arguments, message):
    compiled = dycl.compile(gate(), torch.ones(1, 4), dynamic=False)  # every dim static: tests/dynamic has the rest
    with pytest.raises(ValueError) as info:
        compiled.run_numpy(*arguments)
    assert message in str(info.value)


def test_specialized_argument_is_checked():
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x, scale=2.0):
            y = self.fc(x) * scale
            if y.sum() > 0:
                return y
            return -y

    model = Scaled().eval()
    compiled = dycl.compile(model, torch.ones(1, 4))
    x = torch.ones(1, 4)
    assert torch.allclose(compiled(x, scale=2.0), model(x), atol=1e-6)
    with pytest.raises(ValueError, match="argument 'scale' was compiled as 2.0, got 3.0"):
        compiled(x, scale=3.0)


def test_compiling_twice_gives_identical_host_and_manifest(tmp_path):
    first = dycl.compile(gate(), torch.ones(1, 4)).save(tmp_path / "one")
    second = dycl.compile(gate(), torch.ones(1, 4)).save(tmp_path / "two")
    for name in ("host.py", "manifest.json"):
        assert (first / name).read_bytes() == (second / name).read_bytes()


def test_stats_and_graph_picture():
    compiled = dycl.compile(gate(), torch.ones(1, 4))
    stats = compiled.stats
    assert stats["sub_dnns"] == 4 and stats["conditions"] == 1 and stats["unique_compiled"] == 4
    assert set(stats["seconds"]) == {"rewrite", "hcfg", "compile", "host"}
    dot = compiled.graph.to_dot()
    assert dot.count("shape=diamond") == 1 and dot.count("shape=box") == 4
    assert "self.a(x)" in dot


def test_torch_backend_cannot_be_saved(tmp_path):
    compiled = dycl.compile(gate(), torch.ones(1, 4), backend="torch")
    x = torch.randn(1, 4)
    assert torch.allclose(compiled(x)[0], gate()(x)[0], atol=1e-6)
    with pytest.raises(ValueError, match="runs only in-process"):
        compiled.save(tmp_path / "x")


class WithConstantAndIdentity(nn.Module):
    """``h`` does not depend on the input; ``prev = x`` moves a tensor unchanged."""

    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(4, 4)
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = torch.zeros(1, 4) + 0.5
        prev = x
        x = self.fc(x)
        if x.sum() > 0:
            x = prev
        return self.cell(x, h)


def test_optimisation_moves_constants_and_identities_to_the_host(tmp_path):
    torch.manual_seed(0)
    model = WithConstantAndIdentity().eval()
    inputs = [torch.randn(1, 4) * 2 for _ in range(30)]
    optimized = dycl.compile(model, inputs[0])
    plain = dycl.compile(model, inputs[0], optimize=False)
    assert optimized.stats["constants"] == 1 and plain.stats["constants"] == 0
    assert "_constants['h@0']" in optimized.host_source
    assert "prev = x" in optimized.host_source and "prev = x" not in plain.host_source
    for compiled in (optimized, plain):
        assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5) == 2
    from dycl.harness.testing_host import run_host_without_torch

    report = run_host_without_torch(optimized.save(tmp_path / "net"), model, inputs, 1e-5)
    assert report == {"checked": 30, "problems": [], "torch_loaded": False}
    blob = tmp_path / "net" / "constants.bin"
    blob.write_bytes(blob.read_bytes()[:-1] + b"\x01")
    with pytest.raises(ValueError, match="checksum mismatch for constants.bin"):
        dycl.load(tmp_path / "net")


class Widening(nn.Module):
    """After the join, ``x`` is (1, 8) on one path and (1, 4) on the other."""

    def forward(self, x):
        if x.sum() > 0:
            x = torch.cat([x, x * 2], dim=1)
        return x.sum(dim=1) * 2 + x.mean(), x


def test_a_dimension_that_differs_between_predecessors_is_symbolic():
    model = Widening().eval()
    compiled = dycl.compile(model, torch.ones(1, 4))
    symbolic = [dim for entry in compiled.manifest["sub_dnns"].values() for port in entry["inputs"]
                for dim in port["shape"] if isinstance(dim, str)]
    assert symbolic, compiled.manifest["sub_dnns"]
    inputs = signed_inputs(+1.0, 10) + signed_inputs(-1.0, 10)
    assert assert_equivalent(model, compiled, inputs, min_paths=2, atol=1e-5) == 2


def test_lists_of_different_lengths_get_one_variant_each():
    torch.manual_seed(1)
    model = Decoder().eval()
    generator = torch.Generator().manual_seed(0)
    inputs = [torch.randn(1, 4, generator=generator) * 2 for _ in range(40)]
    compiled = dycl.compile(model, inputs[0])
    assert compiled.stats["variants"] > compiled.stats["sub_dnns"]
    assert "self._variant(" in compiled.host_source
    assert assert_equivalent(model, compiled, inputs, min_paths=3, atol=1e-5) >= 3
