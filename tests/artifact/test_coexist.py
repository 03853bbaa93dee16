"""Any number of artifacts live in one process next to the user's own ONNX Runtime
sessions: loading changes no process-wide ONNX Runtime state, each artifact
loads as a module of its own, and each loaded model owns its executables."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper

import dycl
from dycl.harness.testing import assert_equivalent
from tests.artifact.models import early_exit, early_exit_inputs, gate, gate_inputs

ATOL = 1e-5


def _plain_model() -> bytes:
    """What a user's own ONNX model might be: y = relu(x) + 1."""
    one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "one"], ["y"])],
                              "user_graph", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 3])], [one])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9).SerializeToString()


def _check_plain(session: ort.InferenceSession) -> None:
    x = np.array([[-1.0, 0.5, 2.0]], np.float32)
    (y,) = session.run(None, {"x": x})
    np.testing.assert_array_equal(y, np.maximum(x, 0) + 1)


def test_two_artifacts_and_plain_sessions_in_one_process(tmp_path):
    before = ort.InferenceSession(_plain_model(), providers=["CPUExecutionProvider"])  # the user's, default options
    first = dycl.compile(gate(), gate_inputs()[0]).save(tmp_path / "gate")
    second = dycl.compile(early_exit(), early_exit_inputs()[0]).save(tmp_path / "early_exit")
    loaded_first, loaded_second = dycl.load(first), dycl.load(second)
    after = ort.InferenceSession(_plain_model(), providers=["CPUExecutionProvider"])
    assert assert_equivalent(gate(), loaded_first, gate_inputs(), min_paths=2, atol=ATOL) == 2
    assert assert_equivalent(early_exit(), loaded_second, early_exit_inputs(), min_paths=2, atol=ATOL) == 2
    _check_plain(before)
    _check_plain(after)
    again = dycl.load(first)  # the same artifact twice: two independent models
    assert again._host is not loaded_first._host and again._host._call[0] is not loaded_first._host._call[0]
    assert not any(name.startswith(("dycl_artifact", "dycl_host")) for name in sys.modules)


def test_tvm_and_onnxruntime_artifacts_side_by_side(tmp_path):
    pytest.importorskip("tvm", reason="the TVM backend needs the extra: pip install 'dycl[tvm]'")
    on_tvm = dycl.compile(gate(), gate_inputs()[0], backend="tvm").save(tmp_path / "tvm")
    on_ort = dycl.compile(early_exit(), early_exit_inputs()[0]).save(tmp_path / "ort")
    before = ort.InferenceSession(_plain_model(), providers=["CPUExecutionProvider"])
    models = {"tvm": dycl.load(on_tvm), "ort": dycl.load(on_ort)}
    assert assert_equivalent(gate(), models["tvm"], gate_inputs(), min_paths=2, atol=1e-4) == 2
    assert assert_equivalent(early_exit(), models["ort"], early_exit_inputs(), min_paths=2, atol=ATOL) == 2
    _check_plain(before)
    _check_plain(ort.InferenceSession(_plain_model(), providers=["CPUExecutionProvider"]))


_TWO_HOSTS = r'''
import importlib, json, sys
sys.modules["torch"] = None
import numpy as np
import onnxruntime as ort

first, second, plain = sys.argv[1], sys.argv[2], bytes.fromhex(sys.argv[3])
before = ort.InferenceSession(plain, providers=["CPUExecutionProvider"])
hosts = []
for directory in (first, second):  # what a user writes: `import host` from each directory in turn
    sys.path.insert(0, directory)
    sys.modules.pop("host", None)
    hosts.append(importlib.import_module("host"))
    sys.path.pop(0)
models = [hosts[0].load(first), hosts[1].load(second)]
after = ort.InferenceSession(plain, providers=["CPUExecutionProvider"])
x = np.array([[-1.0, 0.5, 2.0]], np.float32)
plain_ok = all(np.array_equal(s.run(None, {"x": x})[0], np.maximum(x, 0) + 1) for s in (before, after))
try:
    hosts[0].load(second)
    crossed = "loaded"
except ValueError as error:
    crossed = str(error)
gate = models[0](np.full((2, 4), 0.5, np.float32))
early = models[1](np.ones((1, 6), np.float32))
print(json.dumps({"plain_ok": plain_ok, "crossed": crossed, "gate": [gate[0].tolist(), gate[1]],
                  "early": early.tolist(), "torch": sys.modules.get("torch") is not None}))
'''


def test_import_host_from_two_artifacts_without_torch(tmp_path):
    first = dycl.compile(gate(), gate_inputs()[0]).save(tmp_path / "gate")
    second = dycl.compile(early_exit(), early_exit_inputs()[0]).save(tmp_path / "early_exit")
    completed = subprocess.run([sys.executable, "-c", _TWO_HOSTS, str(first), str(second), _plain_model().hex()],
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    with torch.no_grad():
        logits, steps = gate()(torch.full((2, 4), 0.5))
        early = early_exit()(torch.ones(1, 6))
    assert report["plain_ok"] and not report["torch"]
    assert "is not the host.py of" in report["crossed"]
    np.testing.assert_allclose(report["gate"][0], logits.numpy(), atol=ATOL)
    assert report["gate"][1] == steps
    np.testing.assert_allclose(report["early"], early.numpy(), atol=ATOL)
    assert onnx.load(first / "subdnn_1.onnx").graph.name == "subdnn_1"
