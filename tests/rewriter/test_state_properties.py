"""``rewriter.state_properties``: a property whose getter names a state slot (an attribute
forward() writes) is never folded to its compile-time value; other attributes are."""

from __future__ import annotations

import functools

import libcst as cst
import torch
from dycl.rewriter.state_properties import LiteralGetattr, attribute_may_read_state, property_may_read_state
from dycl.rewriter.state_table import StateTable
from torch import nn


def _scaled(module):
    return module.last_conf * 2


class Holder(nn.Module):
    LIMIT = 0.5

    def __init__(self) -> None:
        super().__init__()
        self.last_conf = 0.0
        self.threshold = 0.5
        self.register_buffer("log_temp", torch.tensor(0.0))

    @property
    def confident(self):
        return self.last_conf > self.threshold

    @property
    def via_helper(self):
        return _scaled(self) > 1

    @property
    def by_name(self):
        return getattr(self, "last" + "_conf")

    @property
    def temperature(self):
        return self.log_temp.exp()

    @functools.cached_property
    def cached(self):
        return self.last_conf

    def method(self):
        return self.last_conf


def test_a_property_naming_a_slot_may_read_state():
    model = Holder()
    table = StateTable()
    assert not property_may_read_state(table, model, "confident")  # no slot: nothing to read
    table.add(model, "last_conf", "float")
    assert property_may_read_state(table, model, "confident")
    assert property_may_read_state(table, model, "via_helper")  # through a global helper
    assert property_may_read_state(table, model, "by_name")  # a computed name: assume it may
    assert property_may_read_state(table, model, "cached")


def test_plain_attributes_methods_and_stateless_properties_do_not():
    model = Holder()
    table = StateTable()
    table.add(model, "last_conf", "float")
    for name in ("temperature", "threshold", "LIMIT", "method", "last_conf", "missing"):
        assert not property_may_read_state(table, model, name), name


def test_the_other_ways_to_read_a_slot():
    model, other = Holder(), Holder()
    table = StateTable()
    table.add(model, "last_conf", "float")
    assert attribute_may_read_state(table, model, "last_conf")
    assert attribute_may_read_state(table, model, "__dict__")
    assert attribute_may_read_state(table, model, "confident")
    assert not attribute_may_read_state(table, other, "__dict__")  # holds no slot
    assert not attribute_may_read_state(table, model, "threshold")


def test_a_getattr_by_literal_name_reads_the_attribute():
    before = 'a = getattr(self, "last_conf")\nb = getattr(self.inner, "n", 0)\nc = getattr(self, name)\n' \
             'd = getattr(self, "__private")\n'
    after = 'a = self.last_conf\nb = getattr(self.inner, "n", 0)\nc = getattr(self, name)\n' \
            'd = getattr(self, "__private")\n'
    assert cst.parse_module(before).visit(LiteralGetattr()).code == after
