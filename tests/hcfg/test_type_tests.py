"""``hcfg.type_tests``: which tests the explored states decide, and the outcome per state."""

from __future__ import annotations

import libcst as cst
import pytest
import torch
from dycl.hcfg.type_tests import TypeTestEvaluator, decided_type_test, type_test_outcomes

LOCAL = frozenset({"out", "h", "n", "kinds"})
T = torch.zeros(2)


def outcomes(test: str, *states: dict) -> list[bool] | None:
    return type_test_outcomes(cst.parse_expression(test), [{"torch": torch, **s} for s in states], LOCAL,
                              TypeTestEvaluator())


@pytest.mark.parametrize(("test", "states", "expected"), [
    ("isinstance(out, tuple)", [{"out": (T, T)}, {"out": T}], [True, False]),
    ("not isinstance(out, (list, tuple)) and True", [{"out": [T]}], [False]),
    ("h is None", [{"h": None}, {"h": T}], [True, False]),
    ("None is not h or hasattr(h, 'shape')", [{"h": T}], [True]),
    ("type(out) is torch.Tensor", [{"out": T}, {"out": {"a": T}}], [True, False]),
])
def test_type_tests_on_structure_values_are_decided_per_state(test, states, expected):
    assert outcomes(test, *states) == expected


@pytest.mark.parametrize(("test", "state"), [
    ("isinstance(n, int)", {"n": 3}),                          # a Python number: its type may follow data
    ("isinstance(out, tuple) and out[0].sum() > 0", {"out": (T,)}),  # reads values
    ("isinstance(out, kinds)", {"out": T, "kinds": tuple}),    # the class is a local
    ("h is None", {}),                                         # unbound here
    ("h == None", {"h": None}),                                # equality may be overloaded
])
def test_other_tests_are_not_decided(test, state):
    assert outcomes(test, state) is None


def test_a_shadowed_builtin_is_no_type_test():
    evaluate = TypeTestEvaluator()
    states = [{"out": T, "isinstance": lambda a, b: False}]
    assert type_test_outcomes(cst.parse_expression("isinstance(out, tuple)"), states, LOCAL, evaluate) is None


def test_decided_only_where_every_state_agrees():
    evaluate = TypeTestEvaluator()
    test = cst.parse_expression("h is None")
    assert decided_type_test(test, [{"h": None}, {"h": None}], LOCAL, evaluate) is True
    assert decided_type_test(test, [{"h": None}, {"h": T}], LOCAL, evaluate) is None


def test_a_type_test_joined_to_a_tensor_test_decides_the_states_it_settles():
    local = LOCAL | {"kwargs", "x"}
    evaluate = TypeTestEvaluator()
    test = cst.parse_expression('"scale" in kwargs and x.sum() > 0')
    states = [{"kwargs": {}, "x": T}, {"kwargs": {"scale": T}, "x": T}]
    assert type_test_outcomes(test, states, local, evaluate) == [False, None]
    test = cst.parse_expression('kwargs.get("mask") is None or x.sum() > 0')
    states = [{"kwargs": {"mask": T}, "x": T}, {"kwargs": {}, "x": T}]
    assert type_test_outcomes(test, states, local, evaluate) == [None, True]
    assert decided_type_test(test, states, local, evaluate) is None


SIZED = frozenset({"parts"})


@pytest.mark.parametrize(("test", "expected"), [
    ("parts", [False, True]),
    ("not parts", [True, False]),
    ("len(parts) > 0", [False, True]),
    ("len(parts) == 2", [False, False]),
    ("len(parts)", [False, True]),
])
def test_length_tests_of_path_lengths_are_decided_per_state(test, expected):
    states = [{"parts": []}, {"parts": [T]}]
    got = type_test_outcomes(cst.parse_expression(test), states, LOCAL | SIZED, TypeTestEvaluator(), SIZED)
    assert got == expected


def test_a_length_test_of_another_list_is_not_decided():
    states = [{"parts": []}, {"parts": [T]}]  # no ``sized``: its length may follow data (``x.tolist()``)
    assert type_test_outcomes(cst.parse_expression("parts"), states, LOCAL | SIZED, TypeTestEvaluator()) is None
