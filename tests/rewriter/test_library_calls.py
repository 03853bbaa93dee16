"""Library helpers on literals (``rewriter.library_calls``), registered data from a registry
lookup (``rewriter.registry_lookups``) and inert aliases nothing reads (``rewriter.dead_containers``):
the pieces that let transformers' ``@capture_outputs`` wrapper fold for a call form."""

from __future__ import annotations

import dataclasses
import textwrap

import libcst as cst
import pytest
from dycl.rewriter.dead_containers import drop_dead_containers
from dycl.rewriter.library_calls import call_on_literals, is_library_function
from dycl.rewriter.registry_lookups import chose_a_function, lookup_arguments_static


def test_a_library_helper_on_literals_is_evaluated_and_its_container_result_copied():
    capturing = pytest.importorskip("transformers.utils.output_capturing")
    helper = capturing.selected_hidden_states
    assert is_library_function(helper) and not is_library_function(len) and not is_library_function(
        test_a_library_helper_on_literals_is_evaluated_and_its_container_result_copied)  # the user's: rewritten
    fresh = []
    assert call_on_literals(helper, [False], {}, fresh.append) == (True, None)
    assert call_on_literals(helper, [[0, -1]], {}, fresh.append) == (True, [0, -1]) and fresh == [[0, -1]]
    assert call_on_literals(helper, [object()], {}, fresh.append) == (False, None)  # not a literal: dynamic


@dataclasses.dataclass
class _Recorder:
    target_class: type
    index: int = 0


def test_a_registry_lookup_may_be_keyed_on_a_module_and_give_registered_data():
    torch = pytest.importorskip("torch")
    assert lookup_arguments_static([torch.nn.Linear(2, 2)], {})
    assert chose_a_function({"hidden_states": _Recorder(torch.nn.Linear), "attentions": [_Recorder(str, 1)]})
    assert not chose_a_function({"weights": torch.zeros(2)}) and not chose_a_function(object())


def test_an_inert_alias_nothing_reads_is_dropped_with_what_only_it_read():
    body = list(cst.parse_module(textwrap.dedent('''
        args = (self.layer, x)
        func_name = f"{args[0].__class__.__name__}.forward"
        y = self.layer(x)
        kept = (self.layer, y)
        out = kept[1]
        return out
    ''')).body)
    code = cst.Module(body=drop_dead_containers(body)).code
    assert code == textwrap.dedent('''\
        y = self.layer(x)
        kept = (self.layer, y)
        out = kept[1]
        return out
    ''')
