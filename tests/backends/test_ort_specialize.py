"""The ONNX Runtime host's sessions specialized to input sizes (``ort_runtime._SpecializingExecutable``),
on hand-built ONNX graphs: a size gets its session the second time it is seen, a hit reuses it, the
least recently used is evicted, creation stops at its budget, feeds that give one dim name two sizes
or a session that cannot be created stay on the symbolic session, the switch turns it off, and eight
threads calling with more sizes than are kept get the right answers."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnx
import pytest
from dycl.hostgen.manifest import Port, SubDNNEntry
from onnx import TensorProto, helper

from dycl.backends import ort_runtime

WEIGHTS = np.arange(12, dtype=np.float32).reshape(4, 3) / 10


def _graph(inputs: dict[str, list], body: list[onnx.NodeProto]) -> bytes:
    """An opset-17 model of ``body`` from float inputs of the given dims (str: a named dim) to ``out``,
    with the initializers ``w`` (4 x 3) and ``axis`` ([0])."""
    graph = helper.make_graph(
        body, "g", [helper.make_tensor_value_info(name, TensorProto.FLOAT, dims) for name, dims in inputs.items()],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        [helper.make_tensor("w", TensorProto.FLOAT, [4, 3], WEIGHTS.ravel()),
         helper.make_tensor("axis", TensorProto.INT64, [1], [0])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


def _entry(names: list[str]) -> SubDNNEntry:
    return SubDNNEntry("g.onnx", "0" * 64, tuple(Port(name, "tensor", "float32", ("batch", 4)) for name in names),
                       (Port("out", "tensor", "float32", ("batch", 3)),))


#: x [batch, 4] @ w -> relu
MATMUL = _graph({"x": ["batch", 4]}, [helper.make_node("MatMul", ["x", "w"], ["m"]),
                                      helper.make_node("Relu", ["m"], ["out"])])
#: the column sums of x [batch, 4] and of y [batch, 4] (named alike, yet their sizes need not agree), @ w
TWO_INPUTS = _graph({"x": ["batch", 4], "y": ["batch", 4]},
                    [helper.make_node("ReduceSum", ["x", "axis"], ["sx"], keepdims=0),
                     helper.make_node("ReduceSum", ["y", "axis"], ["sy"], keepdims=0),
                     helper.make_node("Add", ["sx", "sy"], ["s"]),
                     helper.make_node("MatMul", ["s", "w"], ["out"])])


def _matmul(x: np.ndarray) -> np.ndarray:
    return np.maximum(x @ WEIGHTS, 0)


def _loaded(data: bytes = MATMUL, names: tuple[str, ...] = ("x",), **options):
    return ort_runtime.load_executable(data, _entry(list(names)), ort_runtime.runtime_options(threads=1, **options))


def _rows(batch: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed + batch).standard_normal((batch, 4)).astype(np.float32)


def test_a_size_gets_its_session_the_second_time_and_keeps_it():
    executable = _loaded()
    assert type(executable).__name__ == "_SpecializingExecutable" and executable.named == [("x", 0, "batch")]
    x = _rows(3)
    np.testing.assert_allclose(executable(x)[0], _matmul(x), rtol=1e-5)  # first sight: the symbolic session
    assert executable.specialized == {} and executable.created == 0
    np.testing.assert_allclose(executable(x)[0], _matmul(x), rtol=1e-5)  # second: specialized
    assert list(executable.specialized) == [(3, 4)] and executable.created == 1
    for seed in range(3):  # hits: no new session, and other values of the same size
        y = _rows(3, seed + 10)
        np.testing.assert_allclose(executable(y)[0], _matmul(y), rtol=1e-5)
    assert executable.created == 1
    runner = executable.specialized[(3, 4)][0]
    assert runner is not executable._run  # its own session, fixed at batch 3 (shape inference sees 3)
    other = _rows(5)
    np.testing.assert_allclose(executable(other)[0], _matmul(other), rtol=1e-5)  # another size: symbolic
    assert executable.created == 1 and (5, 4) not in executable.specialized


def test_the_specialized_session_is_fixed_to_the_size_and_refuses_another():
    executable = _loaded()
    x = _rows(2)
    executable(x), executable(x)
    session_runner = executable.specialized[(2, 4)][0]
    with pytest.raises(Exception, match="(?i)dimension|shape"):  # so it is never used for other sizes
        session_runner(executable.outputs, {"x": _rows(3)}, None)


def test_a_session_used_since_the_last_eviction_is_kept_and_an_unused_one_goes():
    executable = _loaded()
    kept = ort_runtime.ORT_SPECIALIZED_SESSIONS
    for batch in range(1, kept + 2):  # one more than are kept: the oldest, batch 1, goes
        for _ in range(2):
            np.testing.assert_allclose(executable(_rows(batch))[0], _matmul(_rows(batch)), rtol=1e-5)
    assert sorted(key[0] for key in executable.specialized) == list(range(2, kept + 2))
    executable(_rows(2))  # the oldest left, but used since that eviction
    for _ in range(2):
        executable(_rows(kept + 2))
    assert sorted(key[0] for key in executable.specialized) == [2, *range(4, kept + 3)]  # 3 went, not 2
    assert executable.created == kept + 2


def test_creation_stops_at_its_budget(monkeypatch):
    monkeypatch.setattr(ort_runtime, "ORT_SPECIALIZED_CREATIONS", 3)
    executable = _loaded()
    for batch in (1, 2, 3, 4, 5, 6):
        for _ in range(3):
            x = _rows(batch)
            np.testing.assert_allclose(executable(x)[0], _matmul(x), rtol=1e-5)
    assert executable.created == 3 and sorted(key[0] for key in executable.specialized) == [1, 2, 3]


def test_feeds_giving_one_name_two_sizes_stay_on_the_symbolic_session():
    executable = _loaded(TWO_INPUTS, ("x", "y"))
    assert sorted(executable.named) == [("x", 0, "batch"), ("y", 0, "batch")]
    for _ in range(3):
        x, y = _rows(2), _rows(5)
        np.testing.assert_allclose(executable(x, y)[0], (x.sum(0) + y.sum(0)) @ WEIGHTS, rtol=1e-5)
    assert executable.specialized == {} and (2, 4, 5, 4) in executable.refused
    for _ in range(2):  # agreeing sizes are specialized
        x, y = _rows(4), _rows(4, 7)
        np.testing.assert_allclose(executable(x, y)[0], (x.sum(0) + y.sum(0)) @ WEIGHTS, rtol=1e-5)
    assert list(executable.specialized) == [(4, 4, 4, 4)]


def test_a_session_that_cannot_be_created_leaves_the_size_on_the_symbolic_session(monkeypatch):
    executable = _loaded()
    real = ort_runtime._session

    def failing(data, options, threads=None, sizes=None):
        if sizes:
            raise RuntimeError("no session for you")
        return real(data, options, threads, sizes)

    monkeypatch.setattr(ort_runtime, "_session", failing)
    x = _rows(2)
    for _ in range(4):
        np.testing.assert_allclose(executable(x)[0], _matmul(x), rtol=1e-5)
    assert executable.specialized == {} and executable.refused == {(2, 4)} and executable.created == 0


def test_only_named_dims_are_specialized():
    unnamed = _graph({"x": [None, 4]}, [helper.make_node("MatMul", ["x", "w"], ["out"])])
    assert type(_loaded(unnamed)).__name__ == "_Executable"  # nothing to override by name
    static = _graph({"x": [2, 4]}, [helper.make_node("MatMul", ["x", "w"], ["out"])])
    assert type(_loaded(static)).__name__ == "_Executable"


def test_the_switch_turns_it_off(monkeypatch):
    assert type(_loaded(specialize=False)).__name__ == "_Executable"
    monkeypatch.setenv("DYCL_ORT_SPECIALIZE", "off")
    assert type(_loaded()).__name__ == "_Executable"
    monkeypatch.delenv("DYCL_ORT_SPECIALIZE")
    assert type(_loaded()).__name__ == "_SpecializingExecutable"
    with pytest.raises(ValueError, match="specialize must be True or False"):
        ort_runtime.runtime_options(specialize="off")
    given = ort_runtime.runtime_options(session_options=ort_runtime.session_options_for())
    assert given["specialize"] is False  # a caller's SessionOptions are used as given, never changed


def test_eight_threads_with_more_sizes_than_are_kept_get_right_answers():
    executable = _loaded()
    sizes = list(range(1, ort_runtime.ORT_SPECIALIZED_SESSIONS + 4))
    inputs = {batch: _rows(batch) for batch in sizes}
    expected = {batch: _matmul(x) for batch, x in inputs.items()}

    def worker(k: int) -> int:
        chooser = random.Random(k)
        wrong = 0
        for _ in range(300):
            batch = chooser.choice(sizes)
            wrong += not np.allclose(executable(inputs[batch])[0], expected[batch], rtol=1e-5)
        return wrong

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert sum(pool.map(worker, range(8))) == 0
    assert 0 < executable.created <= ort_runtime.ORT_SPECIALIZED_CREATIONS
    assert len(executable.specialized) <= ort_runtime.ORT_SPECIALIZED_SESSIONS
