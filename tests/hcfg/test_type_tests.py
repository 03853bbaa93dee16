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
