"""``hcfg.size_tests``: which sizes take a branch of a size test, and a state resized to them."""

from __future__ import annotations

import sympy
import torch
from dycl.hcfg.size_tests import pinned_sizes, resized
from dycl.hcfg.state import PathState
from dycl.hcfg.symbolic import SymbolicScalar, SymbolicShapes, SymbolicTensor


def test_only_a_test_that_pins_each_size_gives_sizes():
    shapes = SymbolicShapes()
    batch, seq = shapes.symbol("batch", 2), shapes.symbol("seq", 5)
    assert pinned_sizes(sympy.Eq(batch, 1), True) == {batch: 1}
    assert pinned_sizes(sympy.Eq(batch, 1), False) is None  # any batch but 1
    assert pinned_sizes(sympy.Ne(batch, 1), False) == {batch: 1}
    assert pinned_sizes(sympy.And(sympy.Eq(batch, 1), sympy.Eq(seq, 1)), True) == {batch: 1, seq: 1}
    assert pinned_sizes(sympy.Eq(2 * batch, 6), True) == {batch: 3}
    assert pinned_sizes(batch > 2, True) is None
    assert pinned_sizes(batch < 2, True) == {batch: 1} and pinned_sizes(batch >= 2, False) == {batch: 1}
    assert pinned_sizes(batch <= 3, True) is None  # 1, 2 or 3
    assert pinned_sizes(sympy.Eq(batch, 0), True) is None  # no positive size takes it


def test_a_state_is_resized_along_the_pinned_dims_with_static_mirrors():
    shapes = SymbolicShapes()
    batch = shapes.symbol("batch", 2)
    x = torch.arange(8.0).reshape(2, 4)
    state = {"x": x, "n": 2, "pair": (x, 2), "k": 7}
    mirror = {"x": SymbolicTensor((batch, 4), torch.float32), "n": SymbolicScalar(batch),
              "pair": (SymbolicTensor((batch, 4), torch.float32), SymbolicScalar(batch)), "k": 7}
    one = resized(PathState(state, mirror), {batch: 1}, shapes)
    assert torch.equal(one.concrete["x"], x[:1]) and one.concrete["n"] == 1 and one.concrete["pair"][1] == 1
    assert one.symbolic["x"].shape == (1, 4) and one.concrete["k"] == 7
    three = resized(PathState(state, mirror), {batch: 3}, shapes)
    assert torch.equal(three.concrete["x"], x[[0, 1, 0]])  # repeated cyclically
    assert state["x"] is x and mirror["x"].shape == (batch, 4)  # the original state is untouched


def test_a_state_whose_mirror_does_not_describe_it_is_not_resized():
    shapes = SymbolicShapes()
    batch = shapes.symbol("batch", 2)
    state = {"x": torch.zeros(3, 4)}  # the mirror says 2 rows
    assert resized(PathState(state, {"x": SymbolicTensor((batch, 4), torch.float32)}), {batch: 1}, shapes) is None
