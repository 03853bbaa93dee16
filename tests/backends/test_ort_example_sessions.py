"""The session for the example's sizes, made at load (``SubDNNEntry.sizes``,
``ort_runtime._example_session``): the manifest records each sub-DNN's named dims at the example; a
loaded model runs calls at the example's size on that session from the first call and makes no
session inside them; any other size takes the symbolic session (made on its first call), and the
compiled model equals eager at the example's size and at others, on two paths, in process, loaded
from its artifact and through the torch-free host."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import numpy as np
import torch
from dycl.hostgen.manifest import Port, SubDNNEntry
from onnx import TensorProto, helper
from torch import nn
from torch.nn import functional as F

import dycl
from dycl.backends import ort_runtime
from dycl.backends.example_sizes import example_sizes
from dycl.harness.testing import assert_equivalent
from dycl.harness.testing_host import run_host_without_torch

ATOL = 1e-4
EXAMPLE_BATCH = 4


class GatedRegressor(nn.Module):
    """A tabular regressor that skips its residual tower when the first projection is quiet."""

    def __init__(self, features: int = 12, hidden: int = 32) -> None:
        super().__init__()
        self.inp = nn.Linear(features, hidden)
        self.tower = nn.ModuleList([nn.Linear(hidden, hidden) for _ in range(2)])
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        h = F.silu(self.inp(x))
        if h.abs().mean() < 0.5:  # quiet rows: the shallow answer
            return self.head(self.norm(h)).squeeze(-1)
        for layer in self.tower:
            h = h + F.silu(layer(h))
        return self.head(self.norm(h)).squeeze(-1)


def _rows(batch: int, scale: float, seed: int) -> torch.Tensor:
    return torch.randn(batch, 12, generator=torch.Generator().manual_seed(seed)) * scale


def _example_size_inputs() -> list[torch.Tensor]:
    """Quiet and loud batches (the two paths) of the example's size."""
    return [_rows(EXAMPLE_BATCH, scale, seed) for seed in range(4) for scale in (0.05, 3.0)]


def _other_size_inputs() -> list[torch.Tensor]:
    """Quiet and loud batches of three other sizes, each size seen more than once."""
    return [_rows(batch, scale, 10 + seed) for seed in range(2) for batch in (1, 3, 7) for scale in (0.05, 3.0)]


def _executables(compiled: dycl.CompiledModel) -> list:
    """Every sub-DNN executable of the model that specializes sessions to sizes."""
    found = []
    for variants in compiled._host._variants.values():
        for executable in variants.values():
            for inner in [link[2] for link in executable.chain] if hasattr(executable, "chain") else [executable]:
                if type(inner).__name__ == "_SpecializingExecutable":
                    found.append(inner)
    return found


def _check(model: nn.Module, compiled: dycl.CompiledModel) -> None:
    executables = _executables(compiled)
    assert executables and all(e.symbolic is None and e.created == 1 for e in executables)
    assert {key[0] for e in executables for key in e.specialized} == {EXAMPLE_BATCH}
    assert assert_equivalent(model, compiled, _example_size_inputs(), min_paths=2, atol=ATOL) == 2
    # the example's size ran on the sessions made at load: none made since, none symbolic
    assert all(e.symbolic is None and e.created == 1 for e in executables)
    assert assert_equivalent(model, compiled, _other_size_inputs(), min_paths=2, atol=ATOL) == 2
    assert all(e.symbolic is not None for e in executables)  # both paths ran at other sizes: symbolic made
    assert {key[0] for e in executables for key in e.specialized} >= {EXAMPLE_BATCH, 3}


def test_the_example_size_runs_on_the_session_made_at_load(tmp_path):
    torch.manual_seed(0)
    model = GatedRegressor().eval()
    with torch.no_grad():
        model.inp.bias.zero_()
    compiled = dycl.compile(model, _rows(EXAMPLE_BATCH, 1.0, 99))
    artifact = compiled.save(tmp_path / "net")
    manifest = json.loads((artifact / "manifest.json").read_text())
    sizes = [entry.get("sizes") for entry in manifest["sub_dnns"].values()]
    assert sizes and all(size == {"batch": EXAMPLE_BATCH} for size in sizes)
    _check(model, dycl.load(artifact))  # a fresh load: no call has run yet
    _check(model, dycl.load(artifact))
    report = run_host_without_torch(artifact, model, _example_size_inputs() + _other_size_inputs(), ATOL)
    assert report["checked"] == 8 + 12 and report["problems"] == []
    assert assert_equivalent(model, compiled, _example_size_inputs() + _other_size_inputs(), min_paths=2,
                             atol=ATOL) == 2
    assert EXAMPLE_BATCH in {key[0] for e in _executables(compiled) for key in e.specialized}  # in process too


def test_a_static_compile_records_no_sizes(tmp_path):
    torch.manual_seed(0)
    model = GatedRegressor().eval()
    compiled = dycl.compile(model, _rows(EXAMPLE_BATCH, 1.0, 99), dynamic=False)
    manifest = json.loads((compiled.save(tmp_path / "net") / "manifest.json").read_text())
    assert all("sizes" not in entry for entry in manifest["sub_dnns"].values())
    assert assert_equivalent(model, compiled, _example_size_inputs(), min_paths=2, atol=ATOL) == 2


WEIGHTS = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
#: x [batch, 4] @ w -> relu
MATMUL = helper.make_model(helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["out"])], "g",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
    [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
    [helper.make_tensor("w", TensorProto.FLOAT, [4, 3], WEIGHTS.ravel())]),
    opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


def _loaded(sizes: dict | None):
    entry = SubDNNEntry("g.onnx", "0" * 64, (Port("x", "tensor", "float32", ("batch", 4)),),
                        (Port("out", "tensor", "float32", ("batch", 3)),), sizes=sizes)
    return ort_runtime.load_executable(MATMUL, entry, ort_runtime.runtime_options(threads=1))


def _x(batch: int) -> np.ndarray:
    return np.random.default_rng(batch).standard_normal((batch, 4)).astype(np.float32)


def test_a_size_other_than_the_recorded_one_takes_the_symbolic_session():
    executable = _loaded({"batch": 3})
    assert list(executable.specialized) == [(3, 4)] and executable.symbolic is None
    for batch in (3, 5, 3, 1, 5):
        np.testing.assert_allclose(executable(_x(batch))[0], np.maximum(_x(batch) @ WEIGHTS, 0), rtol=1e-5)
    assert executable.symbolic is not None and executable.named == [("x", 0, "batch")]
    assert (5, 4) in executable.specialized  # seen twice: its own session, as without recorded sizes


def test_sizes_that_leave_a_dim_open_keep_the_symbolic_session_at_load():
    executable = _loaded({"seq": 2})  # names no dim of the graph: batch stays open, so nothing is made early
    assert executable.symbolic is not None and executable.specialized == {}
    np.testing.assert_allclose(executable(_x(2))[0], np.maximum(_x(2) @ WEIGHTS, 0), rtol=1e-5)


def _graph_of(dims: dict[str, list]) -> bytes:
    inputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in dims.items()]
    body = [helper.make_node("Identity", [name], [f"{name}_out"]) for name in dims]
    outputs = [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, None) for name in dims]
    return helper.make_model(helper.make_graph(body, "g", inputs, outputs), ir_version=8,
                             opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _sizes(dims: dict[str, list], example: tuple) -> dict:
    variant = SimpleNamespace(inputs=tuple(SimpleNamespace(name=name) for name in dims), examples=(example,))
    return example_sizes(_graph_of(dims), variant)


def test_example_sizes_name_each_dim_once_or_nothing():
    x, y = torch.zeros(2, 4), torch.zeros(2, 5)
    assert _sizes({"x": ["batch", 4], "y": ["batch", "seq"]}, (x, y)) == {"batch": 2, "seq": 5}
    assert _sizes({"x": ["batch", 4], "y": [2, 5]}, (x, y)) == {"batch": 2}
    assert _sizes({"x": ["batch", 4], "y": ["batch", 5]}, (x, torch.zeros(3, 5))) == {}  # batch 2 and 3
    assert _sizes({"x": ["2*batch", 4]}, (x,)) == {}  # an expression: no name fixes it
    assert _sizes({"x": [None, 4]}, (x,)) == {}  # an unnamed dim
    assert _sizes({"x": [2, 4]}, (x,)) == {}  # static: nothing to fix


def test_threads_calling_the_example_and_other_sizes_at_once_get_the_right_rows():
    executable = _loaded({"batch": 3})
    batches = [3, 5, 3, 1, 3, 7, 5, 3] * 6

    def run(batch: int) -> bool:
        return np.allclose(executable(_x(batch))[0], np.maximum(_x(batch) @ WEIGHTS, 0), rtol=1e-5)

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(run, batches))
    assert executable.symbolic is not None and (3, 4) in executable.specialized
