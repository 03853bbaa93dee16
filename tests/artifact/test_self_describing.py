"""A saved artifact explains itself: README.md (inputs, outputs, requirements,
use, threads), requirements.txt, ``python host.py --help`` and ``python host.py
IN.npy --out OUT.npz``; the manifest lists the outputs; every ONNX sub-DNN names
its HCFG node and source lines. The fresh-venv test installs only
requirements.txt and runs the host there (marked slow: ``make test-slow``)."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

import dycl
from tests.artifact.models import gate, gate_inputs, warm_start

ATOL = 1e-5


@pytest.fixture(scope="module")
def artifact(tmp_path_factory) -> Path:
    return dycl.compile(gate(), gate_inputs()[0]).save(tmp_path_factory.mktemp("described") / "net")


def test_manifest_lists_outputs_and_readme_describes_them(artifact):
    manifest = dycl.artifact.verify(artifact)
    assert manifest["outputs"] == [
        {"name": "output_0", "kind": "tensor", "dtype": "float32", "example_shape": [1, 2], "shape": ["batch", 2]},
        {"name": "output_1", "kind": "int"}]
    readme = (artifact / "README.md").read_text()
    for needle in ("| `x` | float32 | [batch, 4] |", "| `output_0` | float32 | [batch, 2] |",
                   "| `output_1` | int | - |", "Gate.forward", "onnxruntime>=", "numpy>=", "python host.py",
                   "An artifact is code", "many threads at once"):
        assert needle in readme, needle
    requirements = (artifact / "requirements.txt").read_text().splitlines()
    assert [line.split(">")[0] for line in requirements if not line.startswith("#")] == ["numpy", "onnxruntime"]


def test_onnx_sub_dnns_name_their_node_and_source_lines(artifact):
    manifest = dycl.artifact.verify(artifact)
    source_line = next(number for number, line in enumerate(Path(__file__).with_name("models.py").read_text()
                                                            .splitlines(), 1) if "torch.relu(self.a(x))" in line)
    names = set()
    for name, entry in manifest["sub_dnns"].items():
        model = onnx.load(artifact / entry["file"])
        props = {prop.key: prop.value for prop in model.metadata_props}
        names.add(model.graph.name)
        assert props["dycl.hcfg_node"] == name and props["dycl.model"] == "Gate.forward"
        assert name in props["dycl.shared_by"].split(", ")
        assert model.doc_string == model.graph.doc_string and model.doc_string.startswith(f"dycl sub-DNN {name}")
        if "torch.relu(self.a(x))" in model.doc_string:
            assert props["dycl.source_lines"] == f"models.py:{source_line}"
    assert names == set(manifest["sub_dnns"])


def test_host_command_line_runs_the_model(artifact, tmp_path):
    completed = subprocess.run([sys.executable, str(artifact / "host.py"), "--help"], capture_output=True, text=True)
    assert completed.returncode == 0 and "INPUT.npy" in completed.stdout and "--out OUT.npz" in completed.stdout
    model = gate()
    for index, x in enumerate(gate_inputs(4)):
        np.save(tmp_path / f"x{index}.npy", x.numpy())
        out = tmp_path / f"y{index}.npz"
        completed = subprocess.run([sys.executable, str(artifact / "host.py"), str(tmp_path / f"x{index}.npy"),
                                    "--out", str(out)], capture_output=True, text=True, cwd=tmp_path)
        assert completed.returncode == 0, completed.stderr
        with torch.no_grad():
            logits, steps = model(x)
        saved = np.load(out)
        np.testing.assert_allclose(saved["output_0"], logits.numpy(), atol=ATOL)
        assert saved["output_1"] == steps


def test_save_with_constants_round_trips_through_the_header(tmp_path):
    model = warm_start()
    compiled = dycl.compile(model, torch.randn(1, 4))
    blob = compiled.save(tmp_path / "net") / "constants.bin"
    assert blob.read_bytes().startswith(b"DYCL-CONSTANTS\n")
    inputs = [torch.randn(1, 4, generator=torch.Generator().manual_seed(seed)) for seed in range(12)]
    loaded = dycl.load(tmp_path / "net")
    for x in inputs:
        with torch.no_grad():
            torch.testing.assert_close(loaded(x), model(x), atol=ATOL, rtol=0)


@pytest.mark.slow
def test_fresh_venv_with_only_the_requirements_runs_the_host(artifact, tmp_path):
    """No torch, no dycl: only what requirements.txt names (from the machine's pip
    configuration: its index, or a local wheel directory)."""
    environment = tmp_path / "venv"
    venv.create(environment, with_pip=True)
    python = environment / "bin" / "python"
    install = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "-r", str(artifact / "requirements.txt")],
                             capture_output=True, text=True, timeout=900)
    assert install.returncode == 0, install.stderr[-3000:]
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True)
    installed = {line.split("==")[0].lower() for line in listed.stdout.splitlines()}
    assert "torch" not in installed and "dycl" not in installed and "onnxruntime" in installed
    model = gate()
    for index, x in enumerate(gate_inputs(6)):
        np.save(tmp_path / "x.npy", x.numpy())
        completed = subprocess.run([str(python), str(artifact / "host.py"), str(tmp_path / "x.npy"), "--out",
                                    str(tmp_path / "y.npz")], capture_output=True, text=True, cwd=tmp_path,
                                   env={"PATH": os.environ.get("PATH", "")})
        assert completed.returncode == 0, completed.stderr[-3000:]
        with torch.no_grad():
            logits, steps = model(x)
        saved = np.load(tmp_path / "y.npz")
        np.testing.assert_allclose(saved["output_0"], logits.numpy(), atol=ATOL, err_msg=f"input {index}")
        assert saved["output_1"] == steps
