"""``ShapeGuard`` entries of the manifest: a size condition is read back only if it stays
inside its small grammar (integers, arithmetic, comparisons, ``and``/``or``/``not``,
``min``/``max`` over the dims it names), so a hostile ``manifest.json`` cannot make the host
evaluate anything else; the check itself compares sizes and names the deciding line."""

from __future__ import annotations

import numpy as np
import pytest
from dycl.hostgen.manifest import ArtifactError, ShapeGuard, ShapeGuardError, SubDNNEntry, check_shape_guard


def _guard(holds: str, dims=None) -> ShapeGuard:
    value = {"holds": holds, "dims": dims if dims is not None else {"seq": [0, 1], "batch": [1, 0]},
             "where": "attention.py:12"}
    return ShapeGuard.from_json(value, "sub_dnns.s.guards[0]")


@pytest.mark.parametrize("holds", [
    "__import__('os').system('true')", "seq.bit_length() > 1", "(lambda: 1)()", "[seq][0] > 1", "seq if 1 else 2",
    "seq > 1.5", "seq ** 99 > 1", "open('x')", "max(seq) > 1", "unknown > 1", "1 < seq < 5", "seq > 'a'",
    "(" * 300 + "seq" + ")" * 300,
])
def test_a_condition_outside_the_grammar_is_refused_when_the_manifest_is_read(holds):
    with pytest.raises(ArtifactError, match=r"sub_dnns\.s\.guards\[0\]\.holds: expected a size condition"):
        _guard(holds)


def test_dims_must_be_identifiers_read_from_a_position_and_an_axis():
    with pytest.raises(ArtifactError, match="dims"):
        _guard("x > 1", {"x y": [0, 1]})
    with pytest.raises(ArtifactError, match="dims"):
        _guard("x > 1", {"x": [0, -1]})


@pytest.mark.parametrize(("holds", "sizes", "expected"), [
    ("(seq > 1)", (2, 3), True), ("(seq > 1)", (1, 3), False),
    ("((seq + batch) // 2 <= 4) and not (batch % 2 == 0)", (5, 3), True),
    ("((seq + batch) // 2 <= 4) and not (batch % 2 == 0)", (5, 4), False),
    ("max(seq, batch) == 7 or min(seq, batch) ** 2 == 9", (3, 5), True),
    ("-seq + 2 * batch != 0", (4, 2), False),
])
def test_a_condition_is_evaluated_on_the_sizes_of_the_inputs(holds, sizes, expected):
    seq, batch = sizes
    args = (np.zeros((1, seq)), np.zeros((batch, 1)))
    if expected:
        check_shape_guard(_guard(holds), args, "subdnn_0")
    else:
        with pytest.raises(ShapeGuardError, match=r"decided by the code at attention\.py:12.*got seq = \d+"):
            check_shape_guard(_guard(holds), args, "subdnn_0")


def test_a_size_of_zero_is_refused():
    with pytest.raises(ShapeGuardError, match="a size of 0"):
        check_shape_guard(_guard("seq >= 0"), (np.zeros((1, 0)), np.zeros((2, 1))), "subdnn_0")


def test_an_entry_round_trips_its_guards_and_omits_none():
    value = {"file": "s.onnx", "sha256": "0" * 64, "inputs": [], "outputs": [],
             "guards": [{"holds": "(seq > 1)", "dims": {"seq": [0, 1]}, "where": "a.py:3"}]}
    entry = SubDNNEntry.from_json(value, "sub_dnns.s")
    assert entry.to_json() == value
    assert "guards" not in SubDNNEntry.from_json({**value, "guards": []}, "sub_dnns.s").to_json()
