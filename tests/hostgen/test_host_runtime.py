"""The host runtime as real modules: ``hostgen/host_runtime.py``, ``host_loader.py`` and
``host_router.py`` imported and called directly (binding, input checks, outputs, the line
table, the per-sample join), and the names they share with the emitter."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from dycl.hostgen import host_loader, host_router, host_runtime
from dycl.hostgen.manifest import CallForm, InputShapeError
from dycl.hostgen.names import FORWARD, MODEL_CONSTANTS


def test_the_runtime_uses_the_emitters_names():
    model = host_runtime.HostModel({}, SimpleNamespace(inputs=(), written_inputs=()), {"h@0": 1})
    assert host_runtime.HostModel._emitted == FORWARD
    assert getattr(model, MODEL_CONSTANTS) == {"h@0": 1}
    assert host_router.PerSampleModel._emitted != FORWARD  # the router is the batched host's _forward
    assert host_router.PerSampleModel._forward.__name__ == FORWARD


def test_bind_checks_the_call_against_the_form_compiled(monkeypatch):
    call = CallForm.plain(("x", "n"), {"n": 3}).to_host()
    monkeypatch.setattr(host_runtime, "CALL", call)
    monkeypatch.setattr(host_runtime, "SPECIALIZED", {"n": 3})
    monkeypatch.setattr(host_runtime, "_SIGNATURE", host_runtime._signature(call["parameters"]))
    x = np.ones(2)
    assert host_runtime._bind((x,), {}) == {"n": 3, "x": x}
    assert host_runtime._bind((x, 3), {})["n"] == 3
    with pytest.raises(ValueError, match="argument 'n' was compiled as 3, got 4"):
        host_runtime._bind((x, 4), {})
    with pytest.raises(ValueError, match="the model takes forward"):
        host_runtime._bind((x, 3, 5), {})


def test_check_input_names_the_input_dim_and_the_other_input():
    spec = SimpleNamespace(name="x", dtype="float32", shape=["batch", 3])
    other = SimpleNamespace(name="y", dtype="float32", shape=["batch"])
    dims: dict = {}
    host_runtime._check_input(spec, np.zeros((2, 3), np.float32), dims)
    with pytest.raises(InputShapeError, match=r"input 'y': dimension 0 is 'batch', expected 2 as in input 'x'"):
        host_runtime._check_input(other, np.zeros(5, np.float32), dims)
    with pytest.raises(ValueError, match="expected dtype float32, got float64"):
        host_runtime._check_input(spec, np.zeros((2, 3)), {})
    with pytest.raises(InputShapeError, match=r"dimension 1 is static: 3"):
        host_runtime._check_input(spec, np.zeros((2, 4), np.float32), {})


def test_outputs_are_named_by_position_and_written_back_leaf_by_leaf():
    a, b = np.zeros(2), np.ones(3)
    assert [name for name, _ in host_loader.flat_outputs((a, {"k": b, "m": [a, 1]}))] == \
        ["output_0", "output_1_k", "output_1_m_0", "output_1_m_1"]
    given = {"k": [np.zeros(2), np.zeros(3)]}
    host_runtime.write_back(given, {"k": [np.full(2, 5.0), np.full(3, 7.0)]})
    assert given["k"][0].tolist() == [5.0, 5.0] and given["k"][1].tolist() == [7.0] * 3


def test_a_statement_is_found_on_every_line_it_spans(monkeypatch):
    table = {1: ["call", 0, "m.py:2", "", 0], 2: ["condition", None, "m.py:3", "t > 0", 2],
             5: ["return", None, "", "y", 0]}
    monkeypatch.setattr(host_runtime, "FORWARD_LINES", table)
    assert [host_runtime._statement_at(offset) for offset in range(7)] == \
        [None, table[1], table[2], table[2], table[2], table[5], None]


def test_the_router_joins_samples_as_torch_cat_and_checks_the_batch(monkeypatch):
    rows = [(np.full((1, 2), float(i)), {"n": i}) for i in range(3)]
    joined = host_router._join(rows)
    assert joined[0].shape == (3, 2) and joined[0][:, 0].tolist() == [0.0, 1.0, 2.0]
    assert joined[1] == {"n": [0, 1, 2]}
    assert host_router._join([np.zeros((1, 2)), np.zeros((1, 3))])[1].shape == (1, 3)  # shapes differ: a list
    monkeypatch.setattr(host_router, "SAMPLE_INPUTS", ["x", "y"])
    assert host_router._samples({"x": np.zeros((4, 2)), "y": np.zeros((4,))}) == 4
    with pytest.raises(ValueError, match="input 'y' has 3 samples"):
        host_router._samples({"x": np.zeros((4, 2)), "y": np.zeros((3,))})
